# launch/slurm/common.sh: the body of fimi's Slurm batch scripts (dpo.sbatch,
# grpo.sbatch, sft.sbatch source it inside the allocation). Defines
# fimi_slurm_main, which lays the ranks out over the allocated nodes
# (launch/layout.sh), starts `fimi train` on every rank with `srun
# --mpi=pmix` or Open MPI's `mpirun`, resumes when the run directory already
# holds a complete checkpoint, and requeues the job itself when Slurm warns
# of the end (USR1, from `#SBATCH --signal=B:USR1@...`).
#
# Settings (environment; the .sbatch file gives the defaults):
#   FIMI_ROOT            fimi's source tree, for launch/ (default: $SLURM_SUBMIT_DIR)
#   FIMI                 the fimi binary (default: $FIMI_ROOT/build/cmd/fimi, else fimi on PATH)
#   FIMI_CONFIG          the INI config (relative paths: from the submit directory)
#   FIMI_RUN             the run directory, train.out_dir; on a shared file system
#   FIMI_GPUS_PER_NODE   train ranks per train node (one per GPU; on CPU-only nodes: CPU train ranks)
#   FIMI_ENV_PER_NODE    env ranks on nodes without train ranks (and, unless
#                        FIMI_ENV_ON_TRAIN_NODES says otherwise, beside them)
#   FIMI_TRAIN_NODES     how many of the nodes train (default: all)
#   FIMI_ENV_ON_TRAIN_NODES
#   FIMI_LAUNCHER        srun (default) or mpirun
#   FIMI_DEVICE          cpu or cuda (fimi train --device)
# The batch script's own arguments go to fimi train (e.g. --set train.steps=12).

fimi_log() { echo "[fimi-slurm $(date -u +%FT%TZ) job ${SLURM_JOB_ID:-?}] $*"; }

# USR1 arrives ahead of the time limit or of a preemption (--signal=B:USR1@S):
# requeue this job; Slurm then ends the running step, and the requeued job
# resumes from the newest complete checkpoint.
fimi_on_usr1() {
  fimi_log "USR1: the allocation ends soon; requeueing (the next start resumes from $FIMI_RUN)"
  scontrol requeue "$SLURM_JOB_ID" || fimi_log "scontrol requeue failed: resubmit this script to resume"
}

# Whether $1 holds a complete checkpoint (a step_* directory with DONE):
# then the run resumes from it (fimi train refuses to start over one).
fimi_has_checkpoint() { compgen -G "$1/step_*/DONE" >/dev/null; }

fimi_slurm_main() {
  set -euo pipefail
  [ -n "${SLURM_JOB_ID:-}" ] || { echo "launch/slurm: run this with sbatch (no SLURM_JOB_ID)" >&2; return 2; }
  local root="${FIMI_ROOT:-${SLURM_SUBMIT_DIR:-$PWD}}"
  [ -x "$root/launch/layout.sh" ] ||
    { echo "launch/slurm: $root/launch/layout.sh not found: submit from fimi's source tree or set FIMI_ROOT" >&2; return 2; }
  local fimi="${FIMI:-}"
  if [ -z "$fimi" ]; then
    fimi="$root/build/cmd/fimi"
    [ -x "$fimi" ] || fimi="$(command -v fimi || true)"
  fi
  [ -n "$fimi" ] && [ -x "$fimi" ] || { echo "launch/slurm: no fimi binary (set FIMI=/path/to/fimi)" >&2; return 2; }
  : "${FIMI_CONFIG:?set FIMI_CONFIG to the INI config}" "${FIMI_RUN:?set FIMI_RUN to the run directory}"
  [ -r "$FIMI_CONFIG" ] || { echo "launch/slurm: FIMI_CONFIG=$FIMI_CONFIG: cannot read it" >&2; return 2; }

  # The layout of this allocation, kept beside the run for the record.
  local layout="$FIMI_RUN/launch/job-$SLURM_JOB_ID"
  mkdir -p "$layout"
  bash "$root/launch/layout.sh" --nodes "$SLURM_JOB_NUM_NODES" --gpus "${FIMI_GPUS_PER_NODE:?}" \
    --env-per-node "${FIMI_ENV_PER_NODE:-0}" --train-nodes "${FIMI_TRAIN_NODES:-$SLURM_JOB_NUM_NODES}" \
    ${FIMI_ENV_ON_TRAIN_NODES:+--env-on-train-nodes "$FIMI_ENV_ON_TRAIN_NODES"} \
    --cores-per-node "${SLURM_CPUS_ON_NODE:-$(getconf _NPROCESSORS_ONLN)}" --out "$layout" >"$layout/dry-run.txt"
  local world roles
  world=$(wc -l <"$layout/table")
  roles=$(cat "$layout/roles")
  set -a; source "$layout/rank-env"; set +a  # FIMI_RANK_GPUS, FIMI_RANK_THREADS for rank-env.sh

  local args=(train --config "$FIMI_CONFIG" --device "${FIMI_DEVICE:-cpu}" --set dist.env_ranks=0 --set "dist.roles=$roles")
  local start="new run in $FIMI_RUN"
  if fimi_has_checkpoint "$FIMI_RUN"; then args+=(--resume "$FIMI_RUN") start="resuming $FIMI_RUN"
  else args+=(--set "train.out_dir=$FIMI_RUN"); fi
  args+=("$@")

  # shellcheck source=launch/cluster-env.sh
  source "$root/launch/cluster-env.sh"
  local launch
  case "${FIMI_LAUNCHER:-srun}" in
    srun) # exactly the layout's placement: one host per world rank in SLURM_HOSTFILE
      launch=(env SLURM_HOSTFILE="$layout/hostlist" srun --mpi=pmix --distribution=arbitrary --ntasks="$world"
              --cpus-per-task="${SLURM_CPUS_PER_TASK:-1}" --kill-on-bad-exit=1) ;;
    mpirun) # Open MPI finds the allocation itself; the rankfile places and binds every rank
      launch=(mpirun -np "$world" --rankfile "$layout/rankfile") ;;
    *) echo "launch/slurm: FIMI_LAUNCHER=${FIMI_LAUNCHER}: expected srun or mpirun" >&2; return 2 ;;
  esac
  fimi_log "restart ${SLURM_RESTART_COUNT:-0}; $SLURM_JOB_NUM_NODES nodes, $world ranks (dist.roles=$roles); $start"
  fimi_log "${launch[*]} $root/launch/rank-env.sh $fimi ${args[*]}"

  trap fimi_on_usr1 USR1
  "${launch[@]}" bash "$root/launch/rank-env.sh" "$fimi" "${args[@]}" &
  local pid=$! rc=0
  # wait returns early when a trapped signal arrives; wait again until the step is over.
  while :; do
    rc=0
    wait "$pid" || rc=$?
    kill -0 "$pid" 2>/dev/null || break
  done
  fimi_log "fimi train exited with $rc"
  return "$rc"
}
