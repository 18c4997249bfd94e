"""tests/interop/test_adamw_torch.py: fimi's optimizer against PyTorch.

Runs the same training steps through torch.optim.AdamW (+ clip_grad_norm_ and
transformers' get_cosine_schedule_with_warmup when transformers is present)
and through fimi's optim/ (AdamW over flat buffers with decay ranges, global
norm clipping, the cosine schedule), on the same parameters and gradients,
and compares the parameters, norms and learning rates.

fimi's C sources (kernels/cpu/adamw.c, optim/*.c, core/error.c) are compiled
into a shared library with the system C compiler and driven through ctypes,
so the test needs no CMake target. Skips without torch or a C compiler.

Run: pytest tests/interop/test_adamw_torch.py   (with a Python that has torch)
"""

import ctypes
import math
import os
import shutil
import subprocess

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCES = ["kernels/cpu/adamw.c", "optim/adamw.c", "optim/schedule.c", "optim/clip.c", "core/error.c"]


class AdamWConfig(ctypes.Structure):
    _fields_ = [("beta1", ctypes.c_double), ("beta2", ctypes.c_double), ("eps", ctypes.c_double),
                ("weight_decay", ctypes.c_double)]


class AdamWRange(ctypes.Structure):
    _fields_ = [("offset", ctypes.c_size_t), ("size", ctypes.c_size_t), ("decay", ctypes.c_int)]


class AdamWDecayRules(ctypes.Structure):
    _fields_ = [("decay_norms", ctypes.c_int), ("decay_embeddings", ctypes.c_int)]


class LrSchedule(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("base_lr", ctypes.c_double), ("warmup_steps", ctypes.c_long),
                ("total_steps", ctypes.c_long), ("min_lr_ratio", ctypes.c_double), ("num_cycles", ctypes.c_double)]


class ClipResult(ctypes.Structure):
    _fields_ = [("norm", ctypes.c_double), ("scale", ctypes.c_float), ("finite", ctypes.c_int),
                ("clipped", ctypes.c_int)]


LR_SCHEDULE_CONSTANT_WITH_WARMUP, LR_SCHEDULE_COSINE = 1, 3
FLOAT_P = ctypes.POINTER(ctypes.c_float)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build fimi's optimizer for ctypes")
    out = tmp_path_factory.mktemp("fimi_optim") / "libfimi_optim_test.so"
    cmd = [cc, "-std=gnu11", "-O2", "-fPIC", "-shared", "-fopenmp", "-I", REPO, "-o", str(out)]
    cmd += [os.path.join(REPO, s) for s in SOURCES] + ["-lm"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    so = ctypes.CDLL(str(out))
    so.adamw_name_decays.restype = ctypes.c_int
    so.adamw_name_decays.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(AdamWDecayRules)]
    so.adamw_init.argtypes = [ctypes.c_void_p, ctypes.POINTER(AdamWConfig), ctypes.c_void_p]
    so.adamw_add_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p, FLOAT_P, FLOAT_P, ctypes.c_size_t,
                                    ctypes.POINTER(AdamWRange), ctypes.c_int, ctypes.c_void_p]
    so.adamw_step.argtypes = [ctypes.c_void_p, ctypes.c_double, ctypes.c_float, ctypes.c_void_p]
    so.adamw_free.argtypes = [ctypes.c_void_p]
    so.lr_schedule_lr.restype = ctypes.c_double
    so.lr_schedule_lr.argtypes = [ctypes.POINTER(LrSchedule), ctypes.c_long]
    so.clip_local_sumsq.restype = ctypes.c_double
    so.clip_local_sumsq.argtypes = [ctypes.POINTER(FLOAT_P), ctypes.POINTER(ctypes.c_size_t), ctypes.c_int]
    so.clip_from_sumsq.argtypes = [ctypes.c_double, ctypes.c_double, ctypes.POINTER(ClipResult), ctypes.c_void_p]
    return so


def fp(array):
    return array.ctypes.data_as(FLOAT_P)


# A Gemma-like parameter set in fimi's layout: a "globals" buffer (embedding,
# final norm) and one layer buffer; HF names with their offsets.
V, C, I = 64, 16, 24
GLOBALS = [("model.embed_tokens.weight", (V, C)), ("model.norm.weight", (C,))]
LAYER = [("model.layers.0.input_layernorm.weight", (C,)), ("model.layers.0.self_attn.q_proj.weight", (C, C)),
         ("model.layers.0.self_attn.q_norm.weight", (8,)), ("model.layers.0.mlp.up_proj.weight", (I, C)),
         ("model.layers.0.post_feedforward_layernorm.weight", (C,))]


def hf_trainer_decays(name):
    # The rule fimi documents: norms and the embedding do not decay.
    module = name.rsplit(".", 1)[0]
    return not (module.endswith("norm") or "embed" in module.rsplit(".", 1)[-1])


def run_both(lib, steps, lr, weight_decay, max_norm, schedule, grad_std, seed):
    rng = np.random.default_rng(seed)
    buffers = []  # (name, tensors, flat params, flat grads, ranges)
    rules = AdamWDecayRules(0, 0)
    for bname, table in (("globals", GLOBALS), ("layers.0", LAYER)):
        numel = sum(int(np.prod(s)) for _, s in table)
        flat = rng.standard_normal(numel).astype(np.float32) * 0.5
        ranges, offset = [], 0
        for name, shape in table:
            n = int(np.prod(shape))
            decay = lib.adamw_name_decays(name.encode(), 0, ctypes.byref(rules))
            assert decay == hf_trainer_decays(name), name
            ranges.append((name, shape, offset, n, decay))
            offset += n
        buffers.append((bname, flat, np.zeros(numel, np.float32), ranges))

    # torch: one tensor per HF name, two param groups as transformers' Trainer builds them.
    tensors = {}
    for _, flat, _, ranges in buffers:
        for name, shape, off, n, _ in ranges:
            tensors[name] = torch.nn.Parameter(torch.from_numpy(flat[off:off + n].reshape(shape).copy()))
    decay_params = [tensors[r[0]] for b in buffers for r in b[3] if r[4]]
    other_params = [tensors[r[0]] for b in buffers for r in b[3] if not r[4]]
    opt_t = torch.optim.AdamW([{"params": decay_params, "weight_decay": weight_decay},
                               {"params": other_params, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.999), eps=1e-8)
    sched_t = None
    kind, warmup, total = schedule
    try:
        import transformers.optimization as tro
        if kind == LR_SCHEDULE_COSINE:
            sched_t = tro.get_cosine_schedule_with_warmup(opt_t, warmup, total)
        else:
            sched_t = tro.get_constant_schedule_with_warmup(opt_t, warmup)
    except ImportError:
        pass

    # fimi
    opt_f = ctypes.create_string_buffer(512)
    err = ctypes.create_string_buffer(2048)
    cfg = AdamWConfig(0.9, 0.999, 1e-8, weight_decay)
    assert lib.adamw_init(opt_f, ctypes.byref(cfg), err) == 0, err.raw[4:200]
    for bname, flat, grad, ranges in buffers:
        arr = (AdamWRange * len(ranges))(*[AdamWRange(off, n, decay) for _, _, off, n, decay in ranges])
        rc = lib.adamw_add_buffer(opt_f, bname.encode(), fp(flat), fp(grad), flat.size, arr, len(ranges), err)
        assert rc == 0, err.raw[4:200]
    sched_f = LrSchedule(kind, lr, warmup, total, 0.0, 0.5)

    grad_ptrs = (FLOAT_P * len(buffers))(*[fp(b[2]) for b in buffers])
    grad_sizes = (ctypes.c_size_t * len(buffers))(*[b[2].size for b in buffers])
    norms, lrs = [], []
    for step in range(steps):
        for _, _, grad, ranges in buffers:
            grad[:] = rng.standard_normal(grad.size).astype(np.float32) * grad_std
            for name, shape, off, n, _ in ranges:
                tensors[name].grad = torch.from_numpy(grad[off:off + n].reshape(shape).copy())
        # torch
        lr_t = opt_t.param_groups[0]["lr"]
        # fimi's max_norm <= 0 means "report only"; torch would zero the
        # gradients, so it gets an infinite max_norm (coefficient clamped to 1).
        norm_t = float(torch.nn.utils.clip_grad_norm_(list(tensors.values()), max_norm if max_norm > 0 else math.inf))
        opt_t.step()
        if sched_t is not None:
            sched_t.step()
        # fimi
        lr_f = lib.lr_schedule_lr(ctypes.byref(sched_f), step)
        res = ClipResult()
        sumsq = lib.clip_local_sumsq(grad_ptrs, grad_sizes, len(buffers))
        assert lib.clip_from_sumsq(sumsq, max_norm, ctypes.byref(res), err) == 0
        assert lib.adamw_step(opt_f, lr_f if sched_t is not None else lr, res.scale, err) == 0, err.raw[4:200]
        norms.append((res.norm, norm_t))
        lrs.append((lr_f, lr_t))
    lib.adamw_free(opt_f)

    max_diff = max_ref = 0.0
    for _, flat, _, ranges in buffers:
        for name, shape, off, n, _ in ranges:
            ref = tensors[name].detach().numpy().reshape(-1).astype(np.float64)
            max_diff = max(max_diff, float(np.max(np.abs(flat[off:off + n] - ref))))
            max_ref = max(max_ref, float(np.max(np.abs(ref))))
    return max_diff / max_ref, norms, lrs, sched_t is not None


@pytest.mark.parametrize("kind,warmup", [(LR_SCHEDULE_COSINE, 3), (LR_SCHEDULE_CONSTANT_WITH_WARMUP, 2)])
def test_adamw_matches_torch(lib, kind, warmup):
    steps = 12
    rel, norms, lrs, have_schedule = run_both(lib, steps, lr=1e-2, weight_decay=0.1, max_norm=1.0,
                                              schedule=(kind, warmup, steps), grad_std=0.05, seed=kind)
    print(f"\nschedule {kind}: max |param diff| / max |param| after {steps} steps = {rel:.3e}")
    for f, t in norms:
        assert abs(f - t) <= 2e-6 * t, (f, t)
    assert any(t > 1.0 for _, t in norms), "gradients too small: clipping never exercised"
    if have_schedule:
        for f, t in lrs:
            assert f == pytest.approx(t, rel=1e-15, abs=1e-18), (f, t)
    assert rel <= 2e-6


def test_adamw_no_clip_no_decay_many_steps(lib):
    rel, norms, _, _ = run_both(lib, 50, lr=1e-3, weight_decay=0.0, max_norm=0.0,
                                schedule=(LR_SCHEDULE_CONSTANT_WITH_WARMUP, 0, 50), grad_std=1e-3, seed=7)
    print(f"\n50 steps, lr 1e-3, no clip: max rel param diff {rel:.3e}")
    assert rel <= 2e-6
