#!/usr/bin/env bash
# launch/layout.sh: the rank layout of a fimi job on N nodes: which world rank
# runs where, as what (train rank on a GPU, or CPU env rank), and with which
# partners. Writes the files the launchers read and prints the layout.
#
#   launch/layout.sh --nodes N --gpus G [--env-per-node E] [--train-nodes K]
#                    [--env-on-train-nodes E0] [--cores-per-node C]
#                    [--hosts h1,h2,... | --hostfile FILE] [--out DIR]
#                    [--dry-run | --roles | --table]
#
# Placement, node by node in world-rank order (node-major):
#   nodes 0..K-1 (train nodes): G train ranks (local rank i drives GPU i),
#                               then E0 env ranks (default E0 = E)
#   nodes K..N-1 (CPU nodes):   E env ranks
# K defaults to N. The roles go to fimi as one explicit list,
# dist.roles = "train*G,env*E0,...,env*E" (parallel/roles.h), so fimi's own
# numbering gives train index t and env index e in world-rank order, and the
# partners printed here are computed by the rule of parallel/roles.c: with T
# train and E_total env ranks and m = min(T, E_total), t and e are partners
# iff t mod m == e mod m (tests/slurm/layout_agree.c checks every printed
# partner against rank_layout_partners).
#
# Output:
#   --roles    only the dist.roles value
#   --table    one line per world rank, tab-separated:
#              rank host node local role index gpu cores partners(world ranks, comma-separated, - for none)
#   --dry-run  (default) the same as a readable table, then a summary:
#              ranks per node, and how many train ranks have a partner on
#              another node (env traffic over the network; small messages)
#   --out DIR  also writes DIR/hostfile (Open MPI: "host slots=S"),
#              DIR/rankfile (Open MPI: "rank R=host slot=CORES"), DIR/hostlist
#              (one host per world rank: SLURM_HOSTFILE for srun
#              --distribution=arbitrary), DIR/roles (the dist.roles value),
#              DIR/table (--table) and DIR/rank-env (FIMI_RANK_GPUS and
#              FIMI_RANK_THREADS, what launch/rank-env.sh reads on every rank)
# Hosts: --hosts or --hostfile (first word of each non-comment line), else
# the Slurm allocation's ($SLURM_JOB_NODELIST), else node00, node01, ...
# Cores: each node's C cores (default: this machine's online CPUs) are cut into
# equal contiguous blocks, one per rank of the node, for the rankfile.
set -euo pipefail

die() { echo "launch/layout.sh: $*" >&2; exit 2; }
int_arg() {  # int_arg FLAG VALUE MIN: VALUE when it is an integer >= MIN
  [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge "$3" ] || die "$1 expects an integer >= $3, got '$2'"
  echo "$2"
}

NODES="" GPUS="" ENV_PER_NODE=0 TRAIN_NODES="" ENV_ON_TRAIN="" CORES="" HOSTS_CSV="" HOSTFILE="" OUT="" MODE=dry-run
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) NODES=$(int_arg "$1" "${2:-}" 1); shift 2 ;;
    --gpus) GPUS=$(int_arg "$1" "${2:-}" 0); shift 2 ;;
    --env-per-node) ENV_PER_NODE=$(int_arg "$1" "${2:-}" 0); shift 2 ;;
    --train-nodes) TRAIN_NODES=$(int_arg "$1" "${2:-}" 1); shift 2 ;;
    --env-on-train-nodes) ENV_ON_TRAIN=$(int_arg "$1" "${2:-}" 0); shift 2 ;;
    --cores-per-node) CORES=$(int_arg "$1" "${2:-}" 1); shift 2 ;;
    --hosts) HOSTS_CSV="${2:-}"; shift 2 ;;
    --hostfile) HOSTFILE="${2:-}"; shift 2 ;;
    --out) OUT="${2:-}"; shift 2 ;;
    --dry-run) MODE=dry-run; shift ;;
    --roles) MODE=roles; shift ;;
    --table) MODE=table; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p'; exit 0 ;;
    *) die "unknown argument '$1' (--help lists them)" ;;
  esac
done
[ -n "$NODES" ] || die "--nodes N is required"
[ -n "$GPUS" ] || die "--gpus G is required (train ranks per train node, one per GPU)"
TRAIN_NODES="${TRAIN_NODES:-$NODES}"
ENV_ON_TRAIN="${ENV_ON_TRAIN:-$ENV_PER_NODE}"
[ "$TRAIN_NODES" -le "$NODES" ] || die "--train-nodes $TRAIN_NODES exceeds --nodes $NODES"
[ "$GPUS" -ge 1 ] || die "--gpus 0 leaves no train rank; fimi needs at least one"
CORES="${CORES:-$(getconf _NPROCESSORS_ONLN)}"

# ---- hosts -------------------------------------------------------------------
HOSTS=()
if [ -n "$HOSTS_CSV" ]; then
  IFS=, read -r -a HOSTS <<<"$HOSTS_CSV"
elif [ -n "$HOSTFILE" ]; then
  [ -r "$HOSTFILE" ] || die "--hostfile $HOSTFILE: cannot read it"
  while read -r host _; do
    [ -z "$host" ] || [ "${host:0:1}" = "#" ] || HOSTS+=("$host")
  done <"$HOSTFILE"
elif [ -n "${SLURM_JOB_NODELIST:-}" ] && command -v scontrol >/dev/null; then
  mapfile -t HOSTS < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
else
  for ((n = 0; n < NODES; n++)); do HOSTS+=("$(printf 'node%02d' "$n")"); done
fi
[ "${#HOSTS[@]}" -ge "$NODES" ] || die "$NODES nodes requested but only ${#HOSTS[@]} hosts given (${HOSTS[*]:-none})"

# ---- the layout: one entry per world rank ------------------------------------
R_NODE=() R_LOCAL=() R_ROLE=() R_INDEX=() NODE_RANKS=()
TRAIN_WORLD=() ENV_WORLD=()
ROLES=""
add_item() { ROLES="${ROLES:+$ROLES,}$1*$2"; }
for ((n = 0; n < NODES; n++)); do
  if [ "$n" -lt "$TRAIN_NODES" ]; then ntrain=$GPUS nenv=$ENV_ON_TRAIN; else ntrain=0 nenv=$ENV_PER_NODE; fi
  [ $((ntrain + nenv)) -gt 0 ] || die "node $n (${HOSTS[$n]}) would run no rank: give it env ranks or fewer --nodes"
  [ "$ntrain" -gt 0 ] && add_item train "$ntrain"
  [ "$nenv" -gt 0 ] && add_item env "$nenv"
  NODE_RANKS+=($((ntrain + nenv)))
  for ((i = 0; i < ntrain + nenv; i++)); do
    r=${#R_NODE[@]}
    R_NODE+=("$n") R_LOCAL+=("$i")
    if [ "$i" -lt "$ntrain" ]; then R_ROLE+=(train) R_INDEX+=(${#TRAIN_WORLD[@]}) TRAIN_WORLD+=("$r")
    else R_ROLE+=(env) R_INDEX+=(${#ENV_WORLD[@]}) ENV_WORLD+=("$r"); fi
  done
done
WORLD=${#R_NODE[@]} T=${#TRAIN_WORLD[@]} E=${#ENV_WORLD[@]}
M=$((T < E ? T : E))

partners() {  # partners WORLD_RANK: world ranks of its partners, comma-separated (parallel/roles.c)
  local r=$1 list="" j
  if [ "$M" -gt 0 ]; then
    if [ "${R_ROLE[$r]}" = train ]; then
      for ((j = 0; j < E; j++)); do
        [ $((j % M)) -eq $((R_INDEX[r] % M)) ] && list="${list:+$list,}${ENV_WORLD[$j]}"
      done
    else
      for ((j = 0; j < T; j++)); do
        [ $((j % M)) -eq $((R_INDEX[r] % M)) ] && list="${list:+$list,}${TRAIN_WORLD[$j]}"
      done
    fi
  fi
  echo "${list:--}"
}
cores_of() {  # cores_of WORLD_RANK: the rank's contiguous block of its node's cores ("a-b" or "a")
  local r=$1 per lo
  per=$((CORES / NODE_RANKS[R_NODE[r]]))
  [ "$per" -ge 1 ] || per=1
  lo=$(((R_LOCAL[r] * per) % CORES))
  [ "$per" -eq 1 ] && echo "$lo" || echo "$lo-$((lo + per - 1))"
}

print_table() {  # the --table lines
  local r gpu
  for ((r = 0; r < WORLD; r++)); do
    gpu=-; [ "${R_ROLE[$r]}" = train ] && gpu=${R_LOCAL[$r]}
    printf '%d\t%s\t%d\t%d\t%s\t%d\t%s\t%s\t%s\n' "$r" "${HOSTS[${R_NODE[$r]}]}" "${R_NODE[$r]}" "${R_LOCAL[$r]}" \
      "${R_ROLE[$r]}" "${R_INDEX[$r]}" "$gpu" "$(cores_of "$r")" "$(partners "$r")"
  done
}

if [ -n "$OUT" ]; then
  mkdir -p "$OUT"
  : >"$OUT/hostfile.tmp"; : >"$OUT/rankfile.tmp"; : >"$OUT/hostlist.tmp"
  for ((n = 0; n < NODES; n++)); do echo "${HOSTS[$n]} slots=${NODE_RANKS[$n]}" >>"$OUT/hostfile.tmp"; done
  for ((r = 0; r < WORLD; r++)); do
    echo "rank $r=${HOSTS[${R_NODE[$r]}]} slot=$(cores_of "$r")" >>"$OUT/rankfile.tmp"
    echo "${HOSTS[${R_NODE[$r]}]}" >>"$OUT/hostlist.tmp"
  done
  echo "$ROLES" >"$OUT/roles.tmp"
  print_table >"$OUT/table.tmp"
  gpus="" threads=""
  for ((r = 0; r < WORLD; r++)); do
    gpu=-; [ "${R_ROLE[$r]}" = train ] && gpu=${R_LOCAL[$r]}
    c=$(cores_of "$r") lo=${c%-*} hi=${c#*-}
    gpus="${gpus:+$gpus,}$gpu" threads="${threads:+$threads,}$((hi - lo + 1))"
  done
  printf 'FIMI_RANK_GPUS=%s\nFIMI_RANK_THREADS=%s\n' "$gpus" "$threads" >"$OUT/rank-env.tmp"
  for f in hostfile rankfile hostlist roles table rank-env; do mv "$OUT/$f.tmp" "$OUT/$f"; done
fi

case "$MODE" in
  roles) echo "$ROLES" ;;
  table) print_table ;;
  dry-run)
    echo "world $WORLD ranks: $T train (one per GPU), $E env (CPU) on $NODES nodes"
    echo "dist.roles = $ROLES"
    printf '%-5s %-14s %-5s %-6s %-6s %-4s %-9s %s\n' rank host local role index gpu cores partners
    remote=0
    for ((r = 0; r < WORLD; r++)); do
      gpu=-; [ "${R_ROLE[$r]}" = train ] && gpu=${R_LOCAL[$r]}
      p=$(partners "$r") note=""
      if [ "${R_ROLE[$r]}" = train ] && [ "$p" != - ]; then
        for q in ${p//,/ }; do [ "${R_NODE[$q]}" != "${R_NODE[$r]}" ] && note=" (other node)"; done
        [ -n "$note" ] && remote=$((remote + 1))
      fi
      printf '%-5d %-14s %-5d %-6s %-6d %-4s %-9s %s%s\n' "$r" "${HOSTS[${R_NODE[$r]}]}" "${R_LOCAL[$r]}" \
        "${R_ROLE[$r]}" "${R_INDEX[$r]}" "$gpu" "$(cores_of "$r")" "$p" "$note"
    done
    for ((n = 0; n < NODES; n++)); do echo "node $n ${HOSTS[$n]}: ${NODE_RANKS[$n]} ranks"; done
    [ "$E" -gt 0 ] && echo "train ranks with an env partner on another node: $remote of $T"
    [ -n "$OUT" ] && echo "wrote $OUT/hostfile, rankfile, hostlist, roles, table, rank-env"
    ;;
esac
exit 0
