#!/usr/bin/env bash
# tests/cli_fimi.sh: the `fimi` command end to end: init -> info -> generate
# -> score on the tiny preset, determinism of generation, and clear errors
# (exit code and message) for bad input. Usage: cli_fimi.sh PATH/TO/fimi
set -uo pipefail
FIMI="$1"
source "$(dirname "$0")/lib_cli.sh"
require_python json

expect_ok "info without path" "$FIMI" info
grep -q "CUDA" "$WORK/out" || { echo "FAIL: info does not report CUDA status"; failures=$((failures + 1)); }
expect_ok "init tiny" "$FIMI" init --preset tiny --seed 5 --out "$WORK/tiny"
[ -f "$WORK/tiny/config.json" ] && [ -f "$WORK/tiny/model.safetensors" ] || { echo "FAIL: init files missing"; failures=$((failures + 1)); }
expect_ok "info model dir" "$FIMI" info "$WORK/tiny"
grep -q "model.layers.0.self_attn.q_proj.weight" "$WORK/out" || { echo "FAIL: tensor table missing q_proj"; failures=$((failures + 1)); }
grep -q "parameters" "$WORK/out" || { echo "FAIL: info lacks parameter count"; failures=$((failures + 1)); }

expect_ok "generate" "$FIMI" generate --model "$WORK/tiny" --prompt-ids 2,17,42 --prompt-ids 2,5 --max-new 8 --seed 3 --no-stop --json
cp "$WORK/out" "$WORK/gen1"
expect_ok "generate again" "$FIMI" generate --model "$WORK/tiny" --prompt-ids 2,17,42 --prompt-ids 2,5 --max-new 8 --seed 3 --no-stop --json
cmp -s "$WORK/gen1" "$WORK/out" || { echo "FAIL: same seed gave different tokens"; failures=$((failures + 1)); }
"$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if all(len(c["generated"]) == 8 for c in d["completions"]) else 1)' "$WORK/gen1" || { echo "FAIL: expected 8 generated tokens"; cat "$WORK/gen1"; failures=$((failures + 1)); }

expect_ok "score" "$FIMI" score --model "$WORK/tiny" --ids 2,17,42,99
grep -qE '^\{"logprobs": \[-[0-9.e-]+, -[0-9.e-]+, -[0-9.e-]+\]\}$' "$WORK/out" || { echo "FAIL: score output"; cat "$WORK/out"; failures=$((failures + 1)); }

# Sharded and bf16 exports reload.
expect_ok "init sharded bf16" "$FIMI" init --preset tiny --dtype bf16 --max-shard-mb 0 --out "$WORK/tiny-bf16"
expect_ok "init sharded" "$FIMI" init --preset tiny --max-shard-mb 0.1 --out "$WORK/sharded"
[ -f "$WORK/sharded/model.safetensors.index.json" ] || { echo "FAIL: no shard index"; failures=$((failures + 1)); }
expect_ok "score sharded" "$FIMI" score --model "$WORK/sharded" --ids 2,17,42,99

# Errors: exit non-zero with a message that names the problem.
checks=$((checks + 1))
"$FIMI" frobnicate >/dev/null 2>&1; [ $? -eq 2 ] || { echo "FAIL: unknown command should exit 2"; failures=$((failures + 1)); }
expect_fail "cuda without device" "CUDA" "$FIMI" score --device cuda --model "$WORK/tiny" --ids 2,3
expect_fail "bad device name" "unknown device" "$FIMI" score --device tpu --model "$WORK/tiny" --ids 2,3
expect_fail "unknown preset" "tiny" "$FIMI" init --preset nope --out "$WORK/x"
expect_fail "unknown --set key" "unknown key" "$FIMI" init --set model.colour=red --out "$WORK/x"
expect_fail "bad --set value" "integer" "$FIMI" init --set model.seed=abc --out "$WORK/x"
expect_fail "id outside vocab" "outside the vocabulary" "$FIMI" score --model "$WORK/tiny" --ids 2,999999
expect_fail "garbage ids" "position" "$FIMI" score --model "$WORK/tiny" --ids 2,x
expect_fail "missing model dir" "config.json" "$FIMI" score --model "$WORK/nothing" --ids 2,3
printf '[model]\npreset = tiny\nbogus = 1\n' > "$WORK/bad.ini"
expect_fail "bad ini key" "bad.ini:3" "$FIMI" init --config "$WORK/bad.ini" --out "$WORK/x"
head -c 100 "$WORK/tiny/model.safetensors" > "$WORK/trunc.safetensors"
mkdir -p "$WORK/broken" && cp "$WORK/tiny/config.json" "$WORK/broken/" && cp "$WORK/trunc.safetensors" "$WORK/broken/model.safetensors"
expect_fail "truncated weights" "model.safetensors" "$FIMI" score --model "$WORK/broken" --ids 2,3
echo '{"model_type": "gemma3_text", "hidden_size": "big"}' > "$WORK/broken/config.json"
expect_fail "bad config.json" "hidden_size" "$FIMI" info "$WORK/broken"

cli_summary
