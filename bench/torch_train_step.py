# bench/torch_train_step.py: the PyTorch baseline for bench_train_step.
# Defines a benchmark that builds the same Gemma architecture with
# transformers (Gemma3ForCausalLM / Gemma2ForCausalLM / Gemma4ForCausalLM from a config.json that
# `fimi init --preset NAME --out DIR` wrote), eager attention, float32, random
# weights, and times forward (per-token log-probs: log_softmax + gather) plus
# backward of their negative mean over B x T random tokens.
# Prints one table row or, with --json, one JSON line (same keys as fimi's).
#
# Usage: python torch_train_step.py --model-dir DIR [--batch 8] [--seq 256]
#            [--steps 5] [--warmup 1] [--threads 2] [--json]
# Peak RSS is the whole process (getrusage), so it includes the torch runtime.
import argparse
import json
import resource
import time

import torch
import transformers


def build_model(model_dir):
    cfg = transformers.AutoConfig.from_pretrained(model_dir)
    cfg._attn_implementation = "eager"
    classes = {"gemma3_text": "Gemma3ForCausalLM", "gemma2": "Gemma2ForCausalLM", "gemma4_text": "Gemma4ForCausalLM"}
    cls = getattr(transformers, classes[cfg.model_type])
    model = cls(cfg).float().train()
    # Dropout is 0 in Gemma configs; train() only matters for parity of intent.
    return cfg, model


def step(model, tokens):
    model.zero_grad(set_to_none=True)
    logits = model(input_ids=tokens, use_cache=False).logits  # (B, T, V) fp32
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    lp = logp.gather(2, tokens[:, 1:].unsqueeze(2)).squeeze(2)  # (B, T-1)
    loss = -lp.sum() / tokens.numel()  # same scale as fimi's dlogprobs = -1/(B*T)
    loss.backward()
    return loss.item()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model-dir", required=True, help="directory with config.json")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(1234)
    cfg, model = build_model(a.model_dir)
    params = sum(p.numel() for p in model.parameters())  # tied embedding counted once
    gen = torch.Generator().manual_seed(42)
    tokens = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), generator=gen)

    for _ in range(a.warmup):
        step(model, tokens)
    times = []  # per step: the mean and the best step are both reported
    for _ in range(a.steps):
        t0 = time.perf_counter()
        loss = step(model, tokens)
        times.append(time.perf_counter() - t0)
    secs, best = sum(times), min(times)

    n = a.batch * a.seq
    row = dict(impl="torch", preset=a.model_dir, batch=a.batch, seq=a.seq, steps=a.steps, threads=torch.get_num_threads(),
               tokens_per_s=round(n * a.steps / secs, 1), ms_per_step=round(1e3 * secs / a.steps, 2),
               best_tokens_per_s=round(n / best, 1), best_ms_per_step=round(1e3 * best, 2),
               peak_rss_mib=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1), params=params,
               loss=round(loss, 5), torch=torch.__version__, transformers=transformers.__version__)
    if a.json:
        print(json.dumps(row))
    else:
        keys = ["batch", "seq", "steps", "threads", "tokens_per_s", "ms_per_step", "best_tokens_per_s",
                "best_ms_per_step", "peak_rss_mib", "params", "loss"]
        print(" ".join(f"{k:>12}" for k in keys))
        print(" ".join(f"{row[k]:>12}" for k in keys))


if __name__ == "__main__":
    main()
