#!/usr/bin/env python3
"""bench/gpu/sdpa_torch.py: PyTorch's scaled_dot_product_attention at the shapes
of bench/gpu/bench_gpu_attention.c (B=1, T=4096, hd=256, nh=8, nkv=4, bf16,
causal and sliding window 1024), for comparison with fimi's kernels.

Prints GPU_RESULT lines in the format of tests/gpu/gpu_test.h gpu_report
(op|shape|error|pass|ms|TFLOP/s|GB/s, error -1 = not checked), op names like
torch_sdpa_fwd_causal_cudnn. FLOPs are counted as the C benchmark does:
4*B*nh*pairs*hd for the forward (pairs = T*T/2 causal, the visible pairs under
the window), 2.5x that for the backward.

Backends: causal runs under each of cuDNN and flash attention (is_causal=True,
enable_gqa=True), each alone through torch.nn.attention.sdpa_kernel, so the
line names which one ran. A sliding window needs an explicit mask, which the
flash backend does not take: the window runs with a boolean mask under the
first of cuDNN, memory-efficient and math that accepts it, and the op name
says which. A backend that refuses enable_gqa is retried with K and V
expanded to nh heads beforehand (op name ends in _kvrep); one that refuses
the shape altogether is reported on stderr and skipped.
Timed with CUDA events after warmup.
"""
import sys

import torch
import torch.nn.functional as F

B, T, NH, NKV, HD = 1, 4096, 8, 4, 256
WARMUP, REPS = 3, 20


def visible_pairs(window):
    if window <= 0:
        return T * T / 2.0
    return float(sum(i - max(0, i - window + 1) + 1 for i in range(T)))


def report(op, shape, ms, tflops):
    print(f"GPU_RESULT|{op}|{shape}|{-1.0:.3e}|-|{ms:.4f}|{tflops:.1f}|{0.0:.1f}", flush=True)


def time_ms(fn):
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(REPS):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / REPS


def backends():
    """(name, SDPBackend) pairs this torch build knows, in preference order."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return None, []
    names = [("cudnn", "CUDNN_ATTENTION"), ("flash", "FLASH_ATTENTION"),
             ("efficient", "EFFICIENT_ATTENTION"), ("math", "MATH")]
    return sdpa_kernel, [(n, getattr(SDPBackend, a)) for n, a in names if hasattr(SDPBackend, a)]


def main():
    if not torch.cuda.is_available():
        print("sdpa_torch: no CUDA device, skipped")
        return 77
    torch.manual_seed(0)
    dev, dt = "cuda", torch.bfloat16
    # (B, heads, T, hd): the layout SDPA takes
    q = (torch.rand(B, NH, T, HD, device=dev) * 4 - 2).to(dt).requires_grad_()
    k = (torch.rand(B, NKV, T, HD, device=dev) * 4 - 2).to(dt).requires_grad_()
    v = (torch.rand(B, NKV, T, HD, device=dev) * 2 - 1).to(dt).requires_grad_()
    dout = (torch.rand(B, NH, T, HD, device=dev) * 2 - 1).to(dt)
    scale = HD ** -0.5
    sdpa_kernel, known = backends()
    if sdpa_kernel is None:
        print("sdpa_torch: torch.nn.attention.sdpa_kernel missing, default backend only", file=sys.stderr)
        known = [("default", None)]

    # K and V expanded to nh heads, for backends that refuse enable_gqa
    k_rep = k.detach().repeat_interleave(NH // NKV, dim=1).requires_grad_()
    v_rep = v.detach().repeat_interleave(NH // NKV, dim=1).requires_grad_()

    def run(backend, mask, is_causal, backward, gqa):
        kk, vv = (k, v) if gqa else (k_rep, v_rep)

        def fn():
            extra = {"enable_gqa": True} if gqa else {}
            out = F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask, is_causal=is_causal, scale=scale, **extra)
            if backward:
                q.grad = kk.grad = vv.grad = None
                out.backward(dout)
        if backend is None:
            return fn

        def guarded():
            with sdpa_kernel([backend]):
                fn()
        return guarded

    i = torch.arange(T, device=dev)
    window = 1024
    # True = may attend: j <= i and j > i - window
    window_mask = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - window)
    cases = [("causal", 0, None, True, [n for n in known if n[0] in ("cudnn", "flash", "default")]),
             ("window1024", window, window_mask, False,
              [n for n in known if n[0] in ("cudnn", "efficient", "math", "default")])]
    for mask_name, w, mask, is_causal, candidates in cases:
        shape = f"B{B} T{T} nh{NH} nkv{NKV} hd{HD} w{w}"
        fwd_flops = 4.0 * B * NH * visible_pairs(w) * HD
        for backend_name, backend in candidates:
            done = False
            # GQA natively first; else K/V expanded to nh heads (op name ends in _kvrep)
            for gqa, suffix in ((True, ""), (False, "_kvrep")):
                try:
                    with torch.no_grad():
                        ms_fwd = time_ms(run(backend, mask, is_causal, False, gqa))
                    ms_all = time_ms(run(backend, mask, is_causal, True, gqa))
                except Exception as e:  # the backend refuses this shape, mask or enable_gqa
                    text = str(e).strip()
                    first_line = text.splitlines()[0] if text else type(e).__name__
                    print(f"sdpa_torch: {mask_name} {backend_name}{suffix}: not available ({first_line})",
                          file=sys.stderr)
                    torch.cuda.synchronize()
                    continue
                name = f"{mask_name}_{backend_name}{suffix}"
                report(f"torch_sdpa_fwd_{name}", shape, ms_fwd, fwd_flops / (ms_fwd * 1e-3) / 1e12)
                report(f"torch_sdpa_fwdbwd_{name}", shape, ms_all, 3.5 * fwd_flops / (ms_all * 1e-3) / 1e12)
                done = True
                break
            if done and w > 0:
                break  # the window: only the best backend that accepts the mask
    return 0


if __name__ == "__main__":
    sys.exit(main())
