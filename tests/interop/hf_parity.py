# tests/interop/hf_parity.py: per-token log-prob parity between fimi's CPU
# forward and Hugging Face transformers (eager attention, float32).
# Defines one pytest case per architecture variant: a small random Gemma 3
# text model (mixed sliding/full layers, query_pre_attn_scalar != head_dim,
# linear rope scaling, randomized norms) and Gemma 2 models with loose and
# tight softcaps. Each is saved with save_pretrained (safetensors), scored by
# `fimi score --model DIR --ids ...`, and compared to log_softmax of HF's logits.
#
# Run: FIMI_BIN=build/cmd/fimi .venv/bin/pytest -s tests/interop/hf_parity.py (torch + transformers in .venv)
# Skipped as a whole when torch or transformers is missing (CI has neither).
import json
import os
import subprocess

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIMI_BIN = os.environ.get("FIMI_BIN", os.path.join(REPO_ROOT, "build", "cmd", "fimi"))
TOLERANCE = 1e-4
SEQ_LEN = 40          # > sliding_window, so the window matters
NUM_SEQUENCES = 4
VOCAB = 512

COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=128,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    query_pre_attn_scalar=24,  # deliberately != head_dim
    sliding_window=8,
    max_position_embeddings=128,
    hidden_activation="gelu_pytorch_tanh",
    rms_norm_eps=1e-6,
)


def gemma3_model():
    cfg = transformers.Gemma3TextConfig(
        **COMMON,
        num_hidden_layers=6,
        layer_types=["sliding_attention", "full_attention", "sliding_attention",
                     "sliding_attention", "sliding_attention", "full_attention"],
        rope_scaling={"rope_type": "linear", "factor": 2.0},
        rope_theta=1e6,
        rope_local_base_freq=1e4,
    )
    return transformers.Gemma3ForCausalLM(cfg)


def gemma2_model(attn_cap, final_cap):
    cfg = transformers.Gemma2Config(
        **COMMON,
        num_hidden_layers=4,
        attn_logit_softcapping=attn_cap,
        final_logit_softcapping=final_cap,
        rope_theta=1e4,
    )
    return transformers.Gemma2ForCausalLM(cfg)


VARIANTS = {
    "gemma3": gemma3_model,
    "gemma2-caps50-30": lambda: gemma2_model(50.0, 30.0),
    "gemma2-caps5-3": lambda: gemma2_model(5.0, 3.0),  # caps that bite
}


def randomize(model, seed):
    """Seeded normal weights large enough that every part of the model matters:
    matrices ~ N(0, 0.2^2) (q.k scores of a few units, so small softcaps bite),
    norms ~ N(0, 0.1^2) (not HF's zeros), embedding ~ N(0, 0.4^2) (scaled by
    sqrt(64) on input: hidden states of a few units; logits std ~3)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("embed_tokens.weight"):
                std = 0.4
            elif p.ndim == 1:
                std = 0.1
            else:
                std = 0.2
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float32) * std)


def hf_logprobs(model, ids):
    """log p(ids[t] | ids[<t]) for t = 1..T-1, float64 list."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].double()
    logp = torch.log_softmax(logits[:-1], dim=-1)
    return logp.gather(1, torch.tensor(ids[1:]).unsqueeze(1)).squeeze(1).tolist()


def fimi_logprobs(model_dir, ids):
    cmd = [FIMI_BIN, "score", "--model", str(model_dir), "--ids", ",".join(map(str, ids))]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"{' '.join(cmd[:4])} failed ({res.returncode}): {res.stderr}"
    return json.loads(res.stdout)["logprobs"]


@pytest.fixture(scope="module", autouse=True)
def need_fimi():
    if not os.access(FIMI_BIN, os.X_OK):
        pytest.skip(f"fimi binary not found at {FIMI_BIN} (set FIMI_BIN)")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_logprob_parity(variant, tmp_path):
    torch.manual_seed(0)
    model = VARIANTS[variant]()
    model.config._attn_implementation = "eager"  # the reference math, no fused kernels
    model = model.float().eval()
    randomize(model, seed=1234)
    model.save_pretrained(tmp_path, safe_serialization=True)

    gen = torch.Generator().manual_seed(99)
    worst = 0.0
    spread = []
    for _ in range(NUM_SEQUENCES):
        ids = torch.randint(0, VOCAB, (SEQ_LEN,), generator=gen).tolist()
        ref = hf_logprobs(model, ids)
        got = fimi_logprobs(tmp_path, ids)
        assert len(got) == len(ref) == SEQ_LEN - 1
        worst = max(worst, max(abs(a - b) for a, b in zip(got, ref)))
        spread += ref
    # A meaningful test has log-probs far from uniform (-log V = -6.24).
    print(f"\n{variant}: max |fimi - hf| = {worst:.3e} over {NUM_SEQUENCES}x{SEQ_LEN - 1} tokens; "
          f"hf log-probs in [{min(spread):.2f}, {max(spread):.2f}]")
    assert worst <= TOLERANCE
