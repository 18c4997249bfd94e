#!/usr/bin/env bash
# launch/rank-env.sh: runs one rank's command with its share of the node, as
# launch/layout.sh planned it: `rank-env.sh CMD...` (the launchers put it in
# front of fimi). From FIMI_RANK_GPUS and FIMI_RANK_THREADS (comma lists
# indexed by world rank, from layout.sh --out DIR: DIR/rank-env) and the
# launcher's rank variable (Open MPI: OMPI_COMM_WORLD_RANK; srun: SLURM_PROCID)
# it sets
#   CUDA_VISIBLE_DEVICES  a train rank sees only its GPU (local GPU i, taken
#                         from the list the allocation already set, e.g. by
#                         Slurm's --gpus-per-node), so fimi's "GPU 0" is that
#                         GPU; an env rank sees none (it runs on CPU only)
#   OMP_NUM_THREADS       the rank's cores in the layout, unless already set
# and execs CMD. A rank outside the lists is an error naming it.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: launch/rank-env.sh CMD..." >&2; exit 2; }
RANK="${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${SLURM_PROCID:-}}}"
[ -n "$RANK" ] || { echo "launch/rank-env.sh: no rank variable (OMPI_COMM_WORLD_RANK, PMIX_RANK, SLURM_PROCID): run it under mpirun or srun" >&2; exit 2; }
IFS=, read -r -a GPUS <<<"${FIMI_RANK_GPUS:?launch/rank-env.sh: FIMI_RANK_GPUS is not set (launch/layout.sh --out DIR writes DIR/rank-env)}"
IFS=, read -r -a THREADS <<<"${FIMI_RANK_THREADS:-}"
[ "$RANK" -lt "${#GPUS[@]}" ] ||
  { echo "launch/rank-env.sh: rank $RANK is outside the layout's ${#GPUS[@]} ranks (a different world size?)" >&2; exit 2; }
gpu="${GPUS[$RANK]}"
if [ "$gpu" = - ]; then
  export CUDA_VISIBLE_DEVICES=""
elif [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  IFS=, read -r -a visible <<<"$CUDA_VISIBLE_DEVICES"
  [ "$gpu" -lt "${#visible[@]}" ] ||
    { echo "launch/rank-env.sh: rank $RANK wants local GPU $gpu but CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES" >&2; exit 2; }
  export CUDA_VISIBLE_DEVICES="${visible[$gpu]}"
else
  export CUDA_VISIBLE_DEVICES="$gpu"
fi
[ -n "${OMP_NUM_THREADS:-}" ] || [ -z "${THREADS[$RANK]:-}" ] || export OMP_NUM_THREADS="${THREADS[$RANK]}"
exec "$@"
