#!/usr/bin/env bash
# tests/slurm/launch_mpirun_test.sh: launch/mpirun-5node.sh at one node
# (--nodes 1 --gpus 2: two CPU train ranks on this machine) runs a tiny DPO
# (configs/tiny-cpu-dpo.ini, 12 steps) that ends byte for byte where plain
# `mpirun -np 2 fimi train` ends (weights, metrics); the layout's files and
# bindings are what the script says. Then the paper's 5 x 8 commands in
# --dry-run: 40 train ranks with --map-by ppr:8:node:PE=14 on 112-core
# nodes, the GRPO layout (8 train + 32 env ranks), and an uneven layout that
# needs the rankfile. And launch/comm_volume.py's numbers against the same
# arithmetic done in awk. Usage: launch_mpirun_test.sh PATH/TO/fimi
set -uo pipefail
FIMI="$1"
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
source "$SRC/tests/lib_cli.sh"
command -v "${FIMI_MPIEXEC:-mpirun}" >/dev/null || { echo "SKIPPED: launch_mpirun_test: no mpirun"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
MPI="$SRC/launch/mpirun-5node.sh"
source "$SRC/tests/slurm/lib_tiny_dpo.sh"
prepare_tiny_dpo "$WORK/data"
ARGS=(train --config "$TINY_DPO_CONFIG" "${TINY_DPO_SETS[@]}" --set train.steps=12 --set train.eval_every=6)

# One node: the script against plain mpirun.
hostname >"$WORK/hosts"
# Two ranks on the cores there are; --oversubscribe where this machine has one core.
[ "$(getconf _NPROCESSORS_ONLN)" -ge 2 ] || export FIMI_MPIRUN_FLAGS="--oversubscribe --bind-to none"
expect_ok "mpirun-5node.sh --nodes 1 --gpus 2" "$MPI" --hostfile "$WORK/hosts" --nodes 1 --gpus 2 \
  --layout-dir "$WORK/layout" -- "$FIMI" "${ARGS[@]}" --set train.out_dir="$WORK/script"
cp "$WORK/out" "$WORK/script.out"; cp "$WORK/err" "$WORK/script.err"
expect_true "the command it ran: 2 ranks, ppr:2:node, bound to cores" \
  grep -q "mpirun -np 2 --hostfile $WORK/layout/hostfile --map-by ppr:2:node:PE=" "$WORK/script.out"
expect_true "the roles it set" grep -q -- "--set dist.roles=train\*2" "$WORK/script.out"
expect_true "ZeRO-3 across the 2 ranks" grep -q "ZeRO-3 across 2 ranks" "$WORK/script.out"
expect_true "the hostfile: this host, 2 slots" test "$(cat "$WORK/layout/hostfile")" = "$(hostname) slots=2"
expect_true "rank-env lists: GPU 0 and 1" grep -qx "FIMI_RANK_GPUS=0,1" "$WORK/layout/rank-env"
expect_ok "plain mpirun -np 2" "${FIMI_MPIEXEC:-mpirun}" --oversubscribe -np 2 "$FIMI" "${ARGS[@]}" \
  --set train.out_dir="$WORK/plain"
expect_true "same final weights, byte for byte" \
  cmp "$WORK/script/step_000012/model.safetensors" "$WORK/plain/step_000012/model.safetensors"
expect_true "same per-step metrics" diff <(metrics_without_timing "$WORK/script/metrics.jsonl") \
  <(metrics_without_timing "$WORK/plain/metrics.jsonl")
# A rank outside the layout is refused by rank-env.sh, naming it.
expect_fail "rank-env.sh: a rank outside the layout" "rank 5 is outside the layout's 2 ranks" \
  env OMPI_COMM_WORLD_RANK=5 FIMI_RANK_GPUS=0,1 bash "$SRC/launch/rank-env.sh" true

# The paper's layouts, dry run (no such hosts here).
printf 'gpu%02d\n' 1 2 3 4 5 >"$WORK/hosts5"
expect_ok "5 x 8 DPO, --dry-run" "$MPI" --hostfile "$WORK/hosts5" --cores-per-node 112 --layout-dir "$WORK/l5" \
  --dry-run -- fimi train --config configs/dpo-40gpu.ini
expect_true "40 train ranks, 8 a node, 14 cores each" \
  grep -q "mpirun -np 40 --hostfile $WORK/l5/hostfile --map-by ppr:8:node:PE=14 --bind-to core" "$WORK/out"
expect_true "dist.roles for 5 x 8" grep -q -- "--set dist.roles=train\*8,train\*8,train\*8,train\*8,train\*8" "$WORK/out"
expect_true "rank 39 on gpu05, GPU 7" grep -qP "^39\tgpu05\t4\t7\ttrain\t39\t7\t" "$WORK/l5/table"
expect_ok "GRPO 8 train + 32 env, --dry-run" "$MPI" --hostfile "$WORK/hosts5" --cores-per-node 112 \
  --train-nodes 1 --env-on-train-nodes 0 --env-per-node 8 --layout-dir "$WORK/lg" --dry-run -- fimi train --config c.ini
expect_true "GRPO: dist.roles" grep -q -- "--set dist.roles=train\*8,env\*8,env\*8,env\*8,env\*8" "$WORK/out"
expect_true "GRPO: train rank 0's partners are env ranks 8, 16, 24, 32" grep -qP "^0\tgpu01\t0\t0\ttrain\t0\t0\t0-13\t8,16,24,32$" "$WORK/lg/table"
expect_ok "uneven layout, --dry-run" "$MPI" --hostfile "$WORK/hosts5" --nodes 2 --cores-per-node 112 \
  --train-nodes 1 --env-per-node 2 --layout-dir "$WORK/lu" --dry-run -- fimi train --config c.ini
expect_true "uneven: the rankfile places the ranks" grep -q "mpirun -np 12 --rankfile $WORK/lu/rankfile" "$WORK/out"
expect_true "uneven: rank 11 is node 2's second env rank" grep -qx "rank 11=gpu02 slot=56-111" "$WORK/lu/rankfile"
expect_fail "too few hosts" "5 nodes requested but only 2 hosts given" \
  "$MPI" --hostfile <(printf 'a\nb\n') --dry-run -- fimi train
expect_fail "no command" "no command" "$MPI" --hostfile "$WORK/hosts5"
# launch/comm_volume.py (the numbers docs/cluster.md quotes) against the
# same arithmetic done here: 3 collectives x (n-1)/n x P_g x 2 bytes, and
# (6 P T + attention) / (0.4 x 989e12) with the attention FLOPs of Gemma 4
# E4B at 2 x 32768 tokens (7 full layers of head dim 512, 35 sliding of 256,
# window 512, 8 heads).
expect_ok "comm_volume.py, the paper's DPO run" "$PY" "$SRC/launch/comm_volume.py"
gb=$(awk 'BEGIN { printf "%.2f", 3 * 39 / 40 * 7.463013418e9 * 2 / 1e9 }')
secs=$(awk 'BEGIN { T = 32768; w = 512
  attn = 4 * 8 * (7 * 512 * T * (T + 1) / 2 + 35 * 256 * (w * (w + 1) / 2 + (T - w) * w))
  printf "%.2f", (6 * 4.5e9 * 2 * T + 3 * 2 * attn) / (0.4 * 989e12) }')
expect_true "comm_volume.py: $gb GB per GPU per step" grep -q "= *$gb GB per GPU per step" "$WORK/out"
expect_true "comm_volume.py: $secs s of compute at 40% MFU" grep -q "TFLOP/s = $secs s" "$WORK/out"
expect_true "comm_volume.py: it hides at 40 GPUs" grep -q "hides behind compute: yes" "$WORK/out"
expect_fail "comm_volume.py: a bad value is named" "--mfu must be > 0" "$PY" "$SRC/launch/comm_volume.py" --mfu 0
[ "$failures" -eq 0 ] || { cat "$WORK/script.out" "$WORK/script.err"; }
cli_summary
