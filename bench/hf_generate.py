# bench/hf_generate.py: the Hugging Face baseline for fimi's batched
# generation (bench/rollout_vs_hf.sh). Loads the checkpoint that
# `bench_rollout --export DIR` wrote (config.json + model.safetensors, the
# random weights fimi uses) as Gemma3ForCausalLM in float32, takes the first
# --batch prompts of DIR/prompts.txt (token ids of rendered bank prompts,
# cycled when --batch exceeds them), left-pads them with an attention mask,
# and times model.generate(max_new_tokens=N) with no stop token, sampling at
# temperature 1 (top_k 0, top_p 1) or greedy. Also times the prompt forward
# alone (the prefill share). Prints one JSON line.
#
# Usage: python hf_generate.py --model-dir DIR --batch B --new N [--rounds R] [--threads 2]
#            [--greedy] [--attn sdpa|eager]
import argparse
import json
import time

import torch
import transformers


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--greedy", action="store_true")
    ap.add_argument("--attn", default="sdpa")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(7)
    model = transformers.Gemma3ForCausalLM.from_pretrained(a.model_dir, torch_dtype=torch.float32,
                                                           attn_implementation=a.attn).eval()
    with open(f"{a.model_dir}/prompts.txt") as f:
        lines = [list(map(int, line.split())) for line in f if line.strip()]
    prompts = [lines[b % len(lines)] for b in range(a.batch)]
    width = max(len(p) for p in prompts)
    pad = 0
    ids = torch.full((a.batch, width), pad, dtype=torch.long)
    mask = torch.zeros((a.batch, width), dtype=torch.long)
    for b, p in enumerate(prompts):
        ids[b, width - len(p):] = torch.tensor(p)
        mask[b, width - len(p):] = 1
    gen = dict(max_new_tokens=a.new, min_new_tokens=a.new, do_sample=not a.greedy, pad_token_id=pad,
               eos_token_id=None, use_cache=True)
    if not a.greedy:
        gen.update(temperature=1.0, top_k=0, top_p=1.0)

    def generate(n_new):
        with torch.inference_mode():
            return model.generate(input_ids=ids, attention_mask=mask, **dict(gen, max_new_tokens=n_new,
                                                                             min_new_tokens=n_new))

    generate(4)  # warm-up
    times, prefill = [], []
    for _ in range(a.rounds):
        t0 = time.perf_counter()
        with torch.inference_mode():
            model(input_ids=ids, attention_mask=mask, use_cache=True, logits_to_keep=1)
        prefill.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        out = generate(a.new)
        times.append(time.perf_counter() - t0)
        assert out.shape == (a.batch, width + a.new), out.shape
    n = a.batch * a.new
    best = min(times)
    print(json.dumps(dict(impl="hf", batch=a.batch, new=a.new, prompt_tokens=sum(len(p) for p in prompts),
                          padded_prompt_tokens=a.batch * width, rounds=a.rounds, threads=torch.get_num_threads(),
                          attn=a.attn, greedy=int(a.greedy), tokens_per_s=round(n * a.rounds / sum(times), 1),
                          best_tokens_per_s=round(n / best, 1), best_s=round(best, 4),
                          best_prefill_s=round(min(prefill), 4), torch=torch.__version__,
                          transformers=transformers.__version__)))


if __name__ == "__main__":
    main()
