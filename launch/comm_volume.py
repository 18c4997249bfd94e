#!/usr/bin/env python3
"""launch/comm_volume.py: ZeRO-3 communication per GPU and step next to the
step's compute, from the model's dimensions and the cluster's bandwidths.
Prints every intermediate number, so the arithmetic can be checked by hand.
Standard library only. Defaults: the FiMI paper's DPO run (section 4.3: 40
H200 on five nodes, ZeRO-3, bf16, sequences up to 32,768 tokens, per-device
batch 1, i.e. one chosen + rejected pair per GPU and step) on Gemma 4 E4B.

  launch/comm_volume.py [--params N] [--gathered-params N] [--world 40] ...
  launch/comm_volume.py --help

Model (defaults):
  --params 4.5e9           parameters that do matmul work, the paper's "4.5B
                           effective parameters" (section 2)
  --gathered-params 7.463e9  parameters ZeRO-3 shards and gathers: all of
                           them, the per-layer embedding table included
                           (fimi's gemma4-e4b preset counts 7,463,013,418;
                           docs/gemma4.md)
  --layers 42 --heads 8 --head-dim 256 --global-head-dim 512 --window 512
  --pattern 6              Gemma 4 E4B's attention (model/gemma_config.c
                           gemma4-e4b): every 6th layer attends to the whole
                           sequence, the others to a 512-token window
Run: --seq 32768 --seqs 2 (a DPO pair) --world 40 --gpus-per-node 8
     --param-bytes 2 (bf16 gathers) --grad-bytes 2 (bf16 reduce-scatter; 4 = fp32)
Hardware (defaults, with their sources in docs/cluster.md):
  --nvlink-busbw 370       GB/s, NCCL all-gather / reduce-scatter bus bandwidth on 8 GPUs over NVLink 4
  --nic-gbs 47             GB/s per 400 Gb/s NDR InfiniBand NIC as NCCL reaches it
  --nics-per-node 8
  --peak-tflops 989        H200 dense BF16 tensor-core peak
  --mfu 0.40
"""

import argparse


def parse():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    a = p.add_argument
    a("--params", type=float, default=4.5e9)
    a("--gathered-params", type=float, default=7.463013418e9)
    a("--layers", type=int, default=42)
    a("--heads", type=int, default=8)
    a("--head-dim", type=int, default=256)
    a("--global-head-dim", type=int, default=512)
    a("--window", type=int, default=512)
    a("--pattern", type=int, default=6)
    a("--seq", type=int, default=32768)
    a("--seqs", type=int, default=2)
    a("--world", type=int, default=40)
    a("--gpus-per-node", type=int, default=8)
    a("--param-bytes", type=int, default=2)
    a("--grad-bytes", type=int, default=2)
    a("--nvlink-busbw", type=float, default=370.0)
    a("--nic-gbs", type=float, default=47.0)
    a("--nics-per-node", type=int, default=8)
    a("--peak-tflops", type=float, default=989.0)
    a("--mfu", type=float, default=0.40)
    args = p.parse_args()
    for name in ("params", "gathered_params", "seq", "seqs", "world", "gpus_per_node", "peak_tflops", "mfu"):
        if not getattr(args, name) > 0:
            p.error(f"--{name.replace('_', '-')} must be > 0")
    if args.pattern < 1 or args.layers < 1:
        p.error("--layers and --pattern must be >= 1")
    return args


def attention_flops(a, seq):
    """Forward FLOPs of QK^T and AV for one sequence, causal: query i sees
    min(i + 1, window) keys on sliding layers and i + 1 on full ones."""
    full_layers = a.layers // a.pattern
    sliding_layers = a.layers - full_layers
    keys_full = seq * (seq + 1) / 2
    w = min(a.window, seq)
    keys_sliding = w * (w + 1) / 2 + (seq - w) * w
    # 2 matmuls (scores, weighted values) x 2 FLOPs per multiply-add
    return 4 * a.heads * (full_layers * a.global_head_dim * keys_full + sliding_layers * a.head_dim * keys_sliding), \
        full_layers, sliding_layers


def step_compute(a, seq):
    tokens = a.seqs * seq
    dense = 6 * a.params * tokens            # forward 2PT + backward 4PT
    attn_fwd, _, _ = attention_flops(a, seq)
    attn = 3 * attn_fwd * a.seqs             # forward + backward (2x)
    flops = dense + attn
    return tokens, dense, attn, flops, flops / (a.mfu * a.peak_tflops * 1e12)


def main():
    a = parse()
    n = a.world
    frac = (n - 1) / n
    nodes = -(-n // a.gpus_per_node)
    print(f"ZeRO-3 on {n} GPUs ({nodes} nodes x {a.gpus_per_node}), gathered parameters P_g = {a.gathered_params:.4g}, "
          f"matmul parameters P = {a.params:.4g}")
    print()
    print("communication per GPU and step (ring collectives: each GPU sends and receives (n-1)/n of the full buffer)")
    ag = frac * a.gathered_params * a.param_bytes
    rs = frac * a.gathered_params * a.grad_bytes
    total = 2 * ag + rs
    print(f"  all-gather, forward          (n-1)/n x P_g x {a.param_bytes} B = {frac:.4f} x {a.gathered_params:.4g} x "
          f"{a.param_bytes} = {ag / 1e9:8.2f} GB")
    print(f"  all-gather, backward re-gather                          = {ag / 1e9:8.2f} GB")
    print(f"  reduce-scatter, gradients    (n-1)/n x P_g x {a.grad_bytes} B           = {rs / 1e9:8.2f} GB")
    print(f"  total                                                   = {total / 1e9:8.2f} GB per GPU per step")
    low = 3 * frac * a.params * a.param_bytes
    print(f"  (with only the {a.params:.3g} matmul parameters gathered: {low / 1e9:.2f} GB)")
    print()
    # Bus bandwidth of a ring spanning nodes: a GPU sends 1/nics of its ring
    # traffic through its NIC, so the network caps busBw at nics x NIC rate
    # (docs/cluster.md); inside a node NVLink caps it.
    net = a.nics_per_node * a.nic_gbs if nodes > 1 else float("inf")
    busbw = min(a.nvlink_busbw, net)
    bound = "NVLink" if busbw == a.nvlink_busbw else "InfiniBand"
    if nodes > 1:
        print(f"bus bandwidth: min(NVLink {a.nvlink_busbw:g}, IB {a.nics_per_node} NICs x {a.nic_gbs:g} = "
              f"{net:g}) = {busbw:g} GB/s ({bound}-bound)")
    else:
        print(f"bus bandwidth: one node, NVLink only: {busbw:g} GB/s")
    t_comm = total / (busbw * 1e9)
    print(f"  time = total / busBw = {total / 1e9:.2f} GB / {busbw:g} GB/s = {t_comm * 1e3:.1f} ms")
    one_nic = total / (a.nic_gbs * 1e9) if nodes > 1 else t_comm
    if nodes > 1:
        print(f"  (if the network gave the node only one NIC's {a.nic_gbs:g} GB/s: {one_nic * 1e3:.0f} ms)")
    print()
    tokens, dense, attn, flops, t_comp = step_compute(a, a.seq)
    _, full, sliding = attention_flops(a, a.seq)
    print(f"compute per GPU and step: {a.seqs} sequences x {a.seq} tokens = {tokens} tokens")
    print(f"  dense   6 x P x tokens = 6 x {a.params:.4g} x {tokens} = {dense:.4g} FLOP")
    print(f"  attention ({full} full layers, head dim {a.global_head_dim}; {sliding} sliding, window {a.window}), "
          f"forward + backward = {attn:.4g} FLOP")
    print(f"  total {flops:.4g} FLOP at {a.mfu:.0%} of {a.peak_tflops:g} TFLOP/s = {t_comp:.2f} s")
    print(f"  communication / compute = {t_comm / t_comp:.2%} (one NIC per node: {one_nic / t_comp:.1%})")
    print(f"  hides behind compute: {'yes' if t_comm < t_comp else 'no'}"
          f" (an average layer, P_g / layers: gather {ag / a.layers / 1e6:.0f} MB in "
          f"{ag / a.layers / (busbw * 1e9) * 1e3:.2f} ms against {t_comp / 3 / a.layers * 1e3:.1f} ms of forward)")
    print()
    print("communication against compute by sequence length (same batch and bandwidths):")
    for seq in (512, 1024, 2048, 4096, 8192, 16384, 32768):
        t = step_compute(a, seq)[4]
        print(f"  {seq:6d} tokens: compute {t * 1e3:8.1f} ms, communication {t_comm * 1e3:6.1f} ms "
              f"({t_comm / t:6.1%})")


if __name__ == "__main__":
    main()
