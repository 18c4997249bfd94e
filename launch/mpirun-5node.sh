#!/usr/bin/env bash
# launch/mpirun-5node.sh: starts a fimi command on the paper's cluster, 5 nodes
# x 8 H200 (one train rank per GPU, 40 in all), with Open MPI's mpirun and no
# scheduler; the same script runs one node (--nodes 1).
#
#   launch/mpirun-5node.sh --hostfile HOSTS [--nodes 5] [--gpus 8]
#       [--env-per-node 0] [--train-nodes K] [--env-on-train-nodes E0]
#       [--cores-per-node C] [--layout-dir DIR] [--dry-run] -- fimi train --config F.ini ...
#
# HOSTS: one node name per line (the first --nodes are used). The layout
# (launch/layout.sh: train ranks first on each node, GPU i for local rank i,
# then env ranks) is written to DIR (default ./fimi-layout), and the command
# gets --set dist.env_ranks=0 --set dist.roles=... appended, so fimi numbers
# and pairs the ranks exactly as the layout printed them.
#
# mpirun, and why each part:
#   --hostfile DIR/hostfile       "host slots=R": R ranks per node
#   --map-by ppr:R:node:PE=k      R ranks per node, in node order, so world
#                                 ranks 0..R-1 are node 0 (the layout's
#                                 node-major order); k = C / R cores each
#   --bind-to core                each rank stays on its k cores: no
#                                 migration away from the memory it touched
#                                 (OpenMP threads of a CPU rank, the host-side
#                                 copies of a GPU rank)
#   --rankfile DIR/rankfile       instead of the two above when nodes run
#                                 different numbers of ranks (a GRPO layout
#                                 with train nodes and CPU nodes)
#   --report-bindings             each rank's cores in the log, to check them
#   -x VAR                        the environment of launch/cluster-env.sh
#                                 (NCCL, UCX, Open MPI; why: see that file)
#                                 and launch/rank-env.sh's per-rank lists;
#                                 mpirun forwards only named variables to
#                                 other nodes
# Every rank runs launch/rank-env.sh first (CUDA_VISIBLE_DEVICES = its GPU,
# OMP_NUM_THREADS = its cores). --dry-run prints the layout and the command
# without running it. Extra mpirun flags: FIMI_MPIRUN_FLAGS (e.g.
# --oversubscribe on a test machine, --allow-run-as-root in a container).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
die() { echo "launch/mpirun-5node.sh: $*" >&2; exit 2; }

NODES=5 GPUS=8 HOSTFILE="" LAYOUT_DIR="$PWD/fimi-layout" DRY_RUN=0 LAYOUT_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --hostfile) HOSTFILE="${2:-}"; shift 2 ;;
    --nodes) NODES="${2:-}"; shift 2 ;;
    --gpus) GPUS="${2:-}"; shift 2 ;;
    --env-per-node|--train-nodes|--env-on-train-nodes|--cores-per-node) LAYOUT_ARGS+=("$1" "${2:-}"); shift 2 ;;
    --layout-dir) LAYOUT_DIR="${2:-}"; shift 2 ;;
    --dry-run) DRY_RUN=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p'; exit 0 ;;
    *) die "unknown argument '$1' (the fimi command goes after --)" ;;
  esac
done
[ $# -gt 0 ] || die "no command: add -- fimi train --config F.ini ..."
[ -n "$HOSTFILE" ] || die "--hostfile HOSTS is required (one node name per line)"

bash "$ROOT/launch/layout.sh" --nodes "$NODES" --gpus "$GPUS" --hostfile "$HOSTFILE" "${LAYOUT_ARGS[@]}" \
  --out "$LAYOUT_DIR" --dry-run
WORLD=$(wc -l <"$LAYOUT_DIR/table")
ROLES=$(cat "$LAYOUT_DIR/roles")
set -a; source "$LAYOUT_DIR/rank-env"; set +a
source "$ROOT/launch/cluster-env.sh"

# Equal ranks on every node: --map-by ppr with PE cores each; else the rankfile.
mapfile -t SLOTS < <(sed 's/.*slots=//' "$LAYOUT_DIR/hostfile")
PLACE=(--rankfile "$LAYOUT_DIR/rankfile")
if [ "$(printf '%s\n' "${SLOTS[@]}" | sort -u | wc -l)" = 1 ]; then
  PER_NODE=${SLOTS[0]}
  THREADS=${FIMI_RANK_THREADS%%,*}
  PLACE=(--hostfile "$LAYOUT_DIR/hostfile" --map-by "ppr:$PER_NODE:node:PE=$THREADS" --bind-to core)
fi
EXPORTS=()
for var in "${FIMI_EXPORTED_VARS[@]}" FIMI_RANK_GPUS FIMI_RANK_THREADS; do EXPORTS+=(-x "$var"); done
# shellcheck disable=SC2206
CMD=(mpirun -np "$WORLD" "${PLACE[@]}" --report-bindings "${EXPORTS[@]}" ${FIMI_MPIRUN_FLAGS:-}
     bash "$ROOT/launch/rank-env.sh" "$@" --set dist.env_ranks=0 --set "dist.roles=$ROLES")
echo "${CMD[*]}"
[ "$DRY_RUN" = 1 ] && exit 0
exec "${CMD[@]}"
