# tests/lib_cli.sh: what the tests/cli_*.sh scripts share (sourced, not a
# test itself): a temporary WORK directory removed on exit, counters,
# expect_ok / expect_fail / expect_true / cli_summary, and the tiny data the
# training tests share (make_tiny_tokenizer, tokenize_tiny,
# metrics_without_timing; they need FIMI and SRC set), and PY with
# require_python: the Python the tests run, or a skip.
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
failures=0
checks=0

# PY: the project's Python: FIMI_PYTHON (ctest sets it to what CMake was
# given with -DFIMI_PYTHON=...; else it comes from the environment); else the
# source tree's .venv/bin/python (made by ./test.sh or
# launch/install-deps.sh --python); else python3 from PATH.
PY="${FIMI_PYTHON:-}"
if [ -z "$PY" ]; then
  PY="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv/bin/python"
  [ -x "$PY" ] || PY=python3
fi

# require_python MODULE...: returns when $PY imports every MODULE; else
# prints why and exits 77, which ctest reports as a skipped test (the
# SKIP_RETURN_CODE of tests/CMakeLists.txt), never as a pass or a failure.
require_python() {
  local missing
  if ! missing=$("$PY" -c 'import sys
def ok(m):
    try:
        __import__(m); return True
    except Exception:
        return False
print(" ".join(m for m in sys.argv[1:] if not ok(m)))' "$@" 2>&1); then
    missing="$* (cannot run $PY)"
  fi
  if [ -n "$missing" ]; then
    echo "SKIPPED: $(basename "$0") needs the Python modules $missing, not in $PY;" \
      "run launch/install-deps.sh --python (the .venv) or configure with -DFIMI_PYTHON=/path/to/python"
    exit 77
  fi
}

# has_python MODULE...: whether $PY imports every MODULE (for optional checks).
has_python() { "$PY" -c "import $(IFS=,; echo "$*")" >/dev/null 2>&1; }

expect_ok() {  # expect_ok DESCRIPTION CMD...  (stdout in $WORK/out, stderr in $WORK/err)
  local what="$1"; shift
  checks=$((checks + 1))
  if ! "$@" >"$WORK/out" 2>"$WORK/err"; then
    echo "FAIL: $what: exit $?"; cat "$WORK/err"; failures=$((failures + 1))
  fi
}

expect_fail() {  # expect_fail DESCRIPTION EXPECTED_TEXT CMD...
  local what="$1" text="$2"; shift 2
  checks=$((checks + 1))
  if "$@" >"$WORK/out" 2>"$WORK/err"; then
    echo "FAIL: $what: succeeded but should fail"; failures=$((failures + 1)); return
  fi
  if ! grep -qF -- "$text" "$WORK/err"; then
    echo "FAIL: $what: message lacks \"$text\":"; cat "$WORK/err"; failures=$((failures + 1))
  fi
}

expect_true() {  # expect_true DESCRIPTION CMD...  (a check on files already written)
  local what="$1"; shift
  checks=$((checks + 1))
  "$@" >/dev/null 2>&1 || { echo "FAIL: $what"; failures=$((failures + 1)); }
}

# declare_all_checks FILE...: rewrites task files so every task declares
# seq, db, comm and judge, and the judge also asks for a KYC status word
# (verified, expired, pending) in the agent's messages: tiny GRPO runs of
# kyc_status_check tasks, whose warm start rarely calls the tools right, get
# reward differences from it (the comm check credits a value only after a
# tool result holds it, which such a start seldom reaches; reciting the
# status from memory meets this rubric in some rollouts and not others).
declare_all_checks() {
  local f
  for f in "$@"; do
    "$PY" -c 'import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
with open(sys.argv[1], "w") as out:
    for r in rows:
        r["checks"] = ["seq", "db", "comm", "judge"]
        r.setdefault("assertions", []).append({"text": "The agent states a KYC status.", "rule": "mentions_any",
                                               "args": ["verified", "expired", "pending"]})
        out.write(json.dumps(r) + "\n")' "$f" || return 1
  done
}

cli_summary() {
  echo "$((checks - failures)) passed, $failures failed"
  [ "$failures" -eq 0 ]
}

# write_gemma3_head_dim64 FILE: a config.json for the GPU tests on the host
# stand-in (the CUDA attention takes head_dim 64, 128 or 256): a small Gemma 3
# text model, hidden 128, 2 heads, 1 KV head, 2 layers (one sliding with
# window 8, one global), vocab 600 (make_tiny_tokenizer's).
write_gemma3_head_dim64() {
  cat >"$1" <<'EOF'
{"model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"], "vocab_size": 600, "hidden_size": 128,
 "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
 "head_dim": 64, "query_pre_attn_scalar": 64, "sliding_window": 8, "max_position_embeddings": 2048,
 "layer_types": ["sliding_attention", "full_attention"], "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0}
EOF
}

make_tiny_tokenizer() {  # make_tiny_tokenizer DIR: a 600-token BPE in DIR/tokenizer.json
  expect_ok "tokenizer" "$FIMI" tokenizer train --input "$SRC/tests/interop/tokenizer_corpus.txt" --vocab-size 600 \
    --out "$1/tokenizer.json"
}

tokenize_tiny() {  # tokenize_tiny KIND DIR [PREFIX]: configs/data/tiny-KIND-{train,eval}.jsonl -> DIR/PREFIX{train,eval}.h5
  local kind="$1" dir="$2" prefix="${3:-}" s
  for s in train eval; do
    expect_ok "tokenize $prefix$s" "$FIMI" data tokenize --kind "$kind" --input "$SRC/configs/data/tiny-$kind-$s.jsonl" \
      --tokenizer "$dir/tokenizer.json" --out "$dir/$prefix$s.h5"
  done
}

metrics_without_timing() {  # metrics_without_timing METRICS_JSONL: the per-step metrics minus wall-clock and machine fields
  "$PY" -c 'import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line); d.pop("tokens_per_s"); d.pop("elapsed"); d.pop("run", None)  # run: the machine (BLAS)
    print(json.dumps(d, sort_keys=True))' "$1"
}
