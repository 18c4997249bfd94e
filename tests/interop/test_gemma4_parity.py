# tests/interop/test_gemma4_parity.py: Gemma 4 text models in fimi against
# Hugging Face transformers' Gemma4ForCausalLM (eager attention, float32).
# Defines:
# - per-token log-prob parity on random tiny Gemma 4 models that use every
#   feature fimi implements: per-layer embeddings, kv-shared layers with a
#   double-wide MLP, full-attention layers with their own head dim and keys
#   as values, partial ("proportional") rope, final softcap, odd sizes, and
#   one model without per-layer embeddings or sharing;
# - the text part of a multimodal Gemma4ForConditionalGeneration checkpoint
#   (model_type gemma4, as the E2B/E4B checkpoints ship);
# - a checkpoint `fimi train` writes after 3 SFT steps from such a model
#   loading in Gemma4ForCausalLM with the same log-probs fimi computes.
# Each HF model is randomized (norm gains, layer scalars and all), saved with
# save_pretrained, scored by `fimi score --model DIR --ids ...`, and compared
# to log_softmax of HF's logits.
#
# Run: FIMI_BIN=build/cmd/fimi FIMI_BUILD_DIR=build python -m pytest -s tests/interop/test_gemma4_parity.py
# Skipped as a whole when torch or transformers (5.x, with Gemma 4) is missing.
import json
import os
import subprocess

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "Gemma4ForCausalLM"):
    pytest.skip("this transformers has no Gemma 4", allow_module_level=True)
from hf_parity import hf_logprobs  # noqa: E402  (the Gemma 2/3 parity test's reference log-probs)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.environ.get("FIMI_BUILD_DIR", os.path.join(REPO_ROOT, "build"))
FIMI_BIN = os.environ.get("FIMI_BIN", os.path.join(BUILD_DIR, "cmd", "fimi"))
TOLERANCE = 1e-4      # fp32 on both sides; the differences are summation orders
SEQ_LEN = 40          # > sliding_window, so the window matters
NUM_SEQUENCES = 3

FULL, SLIDE = "full_attention", "sliding_attention"


def all_features():
    """PLE, 2 kv-shared layers (one of each type) with a double-wide MLP,
    full layers with head dim 32 and one kv head used as keys = values,
    partial rope 0.25 (4 of 16 pairs rotate), softcap 30."""
    return dict(
        vocab_size=512, vocab_size_per_layer_input=512, hidden_size=64, intermediate_size=96,
        num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        global_head_dim=32, num_global_key_value_heads=1, attention_k_eq_v=True,
        num_kv_shared_layers=2, use_double_wide_mlp=True, hidden_size_per_layer_input=8,
        sliding_window=8, layer_types=[SLIDE, SLIDE, FULL, SLIDE, SLIDE, FULL],
        final_logit_softcapping=30.0, max_position_embeddings=128,
    )


def odd_sizes():
    """Sizes that are not powers of two, 3 heads, partial rope 0.5 of 7 pairs
    (3 rotate: transformers floors), no keys = values, one shared layer,
    a strong softcap and other rope thetas."""
    return dict(
        vocab_size=301, vocab_size_per_layer_input=301, hidden_size=60, intermediate_size=90,
        num_hidden_layers=5, num_attention_heads=3, num_key_value_heads=1, head_dim=10,
        global_head_dim=14, attention_k_eq_v=False, num_kv_shared_layers=1,
        use_double_wide_mlp=False, hidden_size_per_layer_input=6, sliding_window=5,
        layer_types=[SLIDE, FULL, SLIDE, SLIDE, FULL], final_logit_softcapping=5.0,
        max_position_embeddings=128,
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 500.0},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.5, "rope_theta": 20000.0},
        },
    )


def plain():
    """No per-layer embeddings and no sharing: the Gemma 4 attention alone."""
    return dict(
        vocab_size=400, hidden_size=48, intermediate_size=80, num_hidden_layers=4,
        num_attention_heads=2, num_key_value_heads=2, head_dim=24, global_head_dim=48,
        hidden_size_per_layer_input=0, num_kv_shared_layers=0, sliding_window=6,
        layer_types=[SLIDE, FULL, SLIDE, FULL], max_position_embeddings=128,
    )


VARIANTS = {"all-features": all_features, "odd-sizes": odd_sizes, "plain": plain}


def make_model(kwargs):
    cfg = transformers.Gemma4TextConfig(**kwargs)
    cfg._attn_implementation = "eager"  # the reference math, no fused kernels
    return transformers.Gemma4ForCausalLM(cfg).float().eval()


def randomize(model, seed):
    """Seeded weights large enough that every part matters: matrices
    ~ N(0, 0.2^2), norm gains 1 + N(0, 0.1^2), embeddings ~ N(0, 0.4^2),
    layer scalars in [0.5, 1.5] (a buffer, but in the checkpoint)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.4)
            elif p.ndim == 1:
                p.copy_(1 + torch.randn(p.shape, generator=gen) * 0.1)
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
        for name, b in model.named_buffers():
            if name.endswith("layer_scalar"):
                b.copy_(0.5 + torch.rand(b.shape, generator=gen))


def fimi_logprobs(model_dir, ids):
    cmd = [FIMI_BIN, "score", "--model", str(model_dir), "--ids", ",".join(map(str, ids))]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"{' '.join(cmd[:4])} failed ({res.returncode}): {res.stderr}"
    return json.loads(res.stdout)["logprobs"]


def compare(model, model_dir, vocab, label):
    gen = torch.Generator().manual_seed(99)
    worst, spread = 0.0, []
    for _ in range(NUM_SEQUENCES):
        ids = torch.randint(0, vocab, (SEQ_LEN,), generator=gen).tolist()
        ref = hf_logprobs(model, ids)
        got = fimi_logprobs(model_dir, ids)
        assert len(got) == len(ref) == SEQ_LEN - 1
        worst = max(worst, max(abs(a - b) for a, b in zip(got, ref)))
        spread += ref
    print(f"\n{label}: max |fimi - hf| = {worst:.3e} over {NUM_SEQUENCES}x{SEQ_LEN - 1} tokens; "
          f"hf log-probs in [{min(spread):.2f}, {max(spread):.2f}]")
    # A meaningful test has log-probs spread well away from uniform.
    assert max(spread) - min(spread) > 2.0
    assert worst <= TOLERANCE


@pytest.fixture(scope="module", autouse=True)
def need_fimi():
    if not os.access(FIMI_BIN, os.X_OK):
        pytest.skip(f"fimi binary not found at {FIMI_BIN} (set FIMI_BIN)")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_logprob_parity(variant, tmp_path):
    torch.manual_seed(0)
    kwargs = VARIANTS[variant]()
    model = make_model(kwargs)
    randomize(model, seed=1234)
    model.save_pretrained(tmp_path, safe_serialization=True)
    compare(model, tmp_path, kwargs["vocab_size"], variant)


def test_multimodal_checkpoint_text_parity(tmp_path):
    """A Gemma4ForConditionalGeneration checkpoint (model_type gemma4 with
    text, vision and audio configs, language model under
    model.language_model.*), the layout google/gemma-4-E2B-it and E4B-it
    ship: fimi reads its text_config, skips the vision and audio tensors,
    and scores text as transformers' multimodal model does."""
    kwargs = all_features()
    text = transformers.Gemma4TextConfig(**kwargs)
    vision = transformers.Gemma4VisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                             num_attention_heads=2, num_key_value_heads=2, head_dim=16)
    audio = transformers.Gemma4AudioConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                           output_proj_dims=32, subsampling_conv_channels=[8, 4])
    cfg = transformers.Gemma4Config(text_config=text, vision_config=vision, audio_config=audio, boi_token_id=500,
                                    eoi_token_id=501, image_token_id=502, video_token_id=503, boa_token_id=504,
                                    eoa_token_index=505, audio_token_id=506)
    cfg._attn_implementation = "eager"
    cfg.text_config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.Gemma4ForConditionalGeneration(cfg).float().eval()
    randomize(model, seed=4321)
    model.save_pretrained(tmp_path, safe_serialization=True)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == "gemma4" and "vision_config" in saved and "audio_config" in saved
    compare(model, tmp_path, kwargs["vocab_size"], "gemma4 multimodal checkpoint, text only")


def run_fimi(*args):
    res = subprocess.run([FIMI_BIN, *map(str, args)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"fimi {' '.join(map(str, args[:3]))} failed ({res.returncode}): {res.stderr}"
    return res


def test_fimi_train_checkpoint_loads_in_transformers(tmp_path):
    """A randomized Gemma 4 (every feature) saved by transformers, trained
    3 SFT steps by `fimi train` on the tiny SFT data, written by fimi:
    Gemma4ForCausalLM loads the checkpoint with no missing or unexpected
    tensor, every weight moved, and it gives fimi's log-probs."""
    run_fimi("tokenizer", "train", "--input", os.path.join(REPO_ROOT, "tests/interop/tokenizer_corpus.txt"),
             "--vocab-size", 600, "--out", tmp_path / "tokenizer.json")
    for split in ("train", "eval"):
        run_fimi("data", "tokenize", "--kind", "sft", "--input",
                 os.path.join(REPO_ROOT, f"configs/data/tiny-sft-{split}.jsonl"), "--tokenizer",
                 tmp_path / "tokenizer.json", "--out", tmp_path / f"{split}.h5")
    kwargs = dict(all_features(), vocab_size=600, vocab_size_per_layer_input=600)
    torch.manual_seed(0)
    model = make_model(kwargs)
    randomize(model, seed=77)
    init = tmp_path / "init"
    model.save_pretrained(init, safe_serialization=True)
    (init / "tokenizer.json").write_bytes((tmp_path / "tokenizer.json").read_bytes())
    run_fimi("train", "--config", os.path.join(REPO_ROOT, "configs/tiny-cpu-sft.ini"), "--set", f"train.init={init}",
             "--set", f"data.train={tmp_path / 'train.h5'}", "--set", f"data.eval={tmp_path / 'eval.h5'}",
             "--set", f"train.out_dir={tmp_path / 'run'}", "--set", "train.steps=3", "--set", "train.save_every=3",
             "--set", "train.eval_every=3", "--set", "train.progress=false", "--set", "optim.lr=1e-3",
             "--set", "optim.warmup_steps=0")
    ckpt = tmp_path / "run" / "step_000003"
    trained, info = transformers.Gemma4ForCausalLM.from_pretrained(str(ckpt), dtype=torch.float32,
                                                                   output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    trained.config._attn_implementation = "eager"
    trained = trained.eval()
    before, after = model.state_dict(), trained.state_dict()
    unmoved = [k for k, v in after.items()
               if k != "lm_head.weight" and not k.endswith("layer_scalar") and torch.equal(v, before[k])]
    assert not unmoved, f"training left these unchanged: {unmoved}"
    for k in after:  # layer_scalar is a buffer: carried over, never trained
        if k.endswith("layer_scalar"):
            assert torch.equal(after[k], before[k]), k
    compare(trained, ckpt, 600, "fimi train checkpoint (3 SFT steps) in Gemma4ForCausalLM")
