# bench/trl_dpo_step.py: the Hugging Face TRL side of bench/dpo_vs_trl.sh.
# Defines a benchmark that trains the model `fimi init` wrote (config.json +
# model.safetensors + tokenizer.json; Gemma3ForCausalLM, float32) with TRL's
# DPOTrainer on the same TRL-format JSONL that `fimi data tokenize --kind dpo`
# reads, and times each optimizer step (forward, backward, clipping, AdamW).
#
# Matched to `fimi train` with configs/tiny-cpu-dpo.ini (see dpo_vs_trl.sh):
# sigmoid loss, beta 0.1, BATCH pairs per step, no accumulation, reference
# log-probs precomputed before training (so no step runs the reference),
# float32 without gradient checkpointing (TRL's defaults are bf16 autocast and
# checkpointing on; fimi runs float32 and model.recompute is off), the chat
# rendered in fimi's Gemma layout (docs/chat-format.md) by a chat template, so
# TRL tokenizes the same text into about the same ids.
# Timing: a TrainerCallback, on_step_begin to on_step_end (perf_counter); the
# first step warms up and is left out. tokens of a step = fimi's `tokens`
# (dpo/objective.c tokens_real): over the 2 x BATCH rows (prompt + chosen,
# prompt + rejected), the input positions holding a real token, i.e.
# min(row length, longest row - 1). Prints one JSON line: medians over steps.
#
# Usage: python trl_dpo_step.py --model-dir DIR --data F.jsonl [--steps 6]
#            [--batch 8] [--threads 2] [--attn sdpa|eager]
# Needs torch, transformers, trl (and its datasets, accelerate, jinja2).
import argparse
import json
import statistics
import time

import torch
import transformers
import trl
from datasets import Dataset
from transformers import Gemma3ForCausalLM, PreTrainedTokenizerFast, TrainerCallback

# fimi's layout: <bos>, then per message <start_of_turn>{role}\n{content}<end_of_turn>\n
# with role "model" for the assistant, and <start_of_turn>model\n as the generation prompt.
# (Gemma 3's own template folds the system turn into the user turn; fimi keeps it.)
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>"
    "{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n{{ m['content'] }}<end_of_turn>\n"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


class StepTimer(TrainerCallback):
    """Wall time of each optimizer step (one micro-batch: gradient_accumulation_steps is 1)."""

    def __init__(self):
        self.times, self.t0 = [], None

    def on_step_begin(self, args, state, control, **kw):
        self.t0 = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        self.times.append(time.perf_counter() - self.t0)


class CountingDPOTrainer(trl.DPOTrainer):
    """DPOTrainer that notes each micro-batch's token count (fimi's definition) before training on it."""

    step_tokens = []

    def training_step(self, model, inputs, *args, **kwargs):
        lens = inputs["attention_mask"].sum(dim=1)  # right padding: real tokens per row
        self.step_tokens.append(int(lens.clamp(max=int(lens.max()) - 1).sum()))
        return super().training_step(model, inputs, *args, **kwargs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", required=True, help="fimi init output: config.json, model.safetensors, tokenizer.json")
    ap.add_argument("--data", required=True, help="TRL-format DPO JSONL (prompt/chosen/rejected message lists)")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"])
    ap.add_argument("--out-dir", default=None, help="TrainingArguments.output_dir (nothing is saved there)")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    tok = PreTrainedTokenizerFast(tokenizer_file=f"{a.model_dir}/tokenizer.json", bos_token="<bos>",
                                  eos_token="<eos>", unk_token="<unk>")
    tok.pad_token = "<pad>" if "<pad>" in tok.get_vocab() else tok.eos_token
    tok.chat_template = CHAT_TEMPLATE
    model = Gemma3ForCausalLM.from_pretrained(a.model_dir, dtype=torch.float32, attn_implementation=a.attn)
    with open(a.data) as f:
        data = Dataset.from_list([json.loads(line) for line in f if line.strip()])

    cfg = trl.DPOConfig(
        output_dir=a.out_dir or "trl_dpo_step_out", beta=0.1, loss_type=["sigmoid"],
        per_device_train_batch_size=a.batch, gradient_accumulation_steps=1, learning_rate=2e-3,
        max_steps=a.steps, max_length=4096, precompute_ref_log_probs=True,
        bf16=False, activation_checkpointing=False,  # fimi: float32, no recompute
        use_cpu=True, dataloader_num_workers=0, report_to=[], eval_strategy="no", save_strategy="no",
        logging_strategy="no", disable_tqdm=True, seed=42,
    )
    timer = StepTimer()
    trainer = CountingDPOTrainer(model=model, args=cfg, train_dataset=data, processing_class=tok, callbacks=[timer])
    trainer.train()

    # Step 1 warms up (allocator, OpenMP pools); medians over the rest, as bench/cpu_dpo_step.sh does for fimi.
    secs, toks = timer.times[1:], trainer.step_tokens[1:]
    print(json.dumps(dict(
        impl="trl", attn=a.attn, threads=torch.get_num_threads(), batch=a.batch, steps=len(timer.times),
        seconds_per_step=round(statistics.median(secs), 4),
        tokens_per_s=round(statistics.median(n / s for n, s in zip(toks, secs)), 1),
        pairs_per_s=round(statistics.median(a.batch / s for s in secs), 3),
        tokens_per_pair=round(sum(toks) / (a.batch * len(toks)), 2),
        torch=torch.__version__, transformers=transformers.__version__, trl=trl.__version__)))


if __name__ == "__main__":
    main()
