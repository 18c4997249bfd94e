#!/usr/bin/env bash
# tests/cli_data.sh: `fimi data tokenize|info` end to end with a tokenizer
# trained by `fimi tokenizer train`: SFT and DPO files, counts reported by
# tokenize and read back by info, truncate/drop, malformed rows (the error
# names the line and field; --skip-bad counts them), nothing written after a
# failure, and usage errors. Usage: cli_data.sh PATH/TO/fimi
set -uo pipefail
FIMI="$1"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
source "$SRC/tests/lib_cli.sh"
require_python json
json_field() {  # json_field FILE PYTHON_EXPR(d) -> prints the value
  "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

expect_ok "train tokenizer" "$FIMI" tokenizer train --input "$SRC/tests/interop/tokenizer_corpus.txt" \
  --vocab-size 600 --out "$WORK/tok.json"

cat >"$WORK/sft.jsonl" <<'EOF'
{"messages": [{"role": "system", "content": "You are Navadhan Bank's agent."}, {"role": "user", "content": "Balance?"}, {"role": "assistant", "content": "Checking.", "tool_calls": [{"type": "function", "function": {"name": "get_balance", "arguments": {"account": "1234"}}}]}, {"role": "tool", "content": "{\"name\": \"get_balance\", \"result\": 500}"}, {"role": "assistant", "content": "It is ₹500."}]}
{"prompt": "Namaste", "completion": " ji, kaise madad karun?"}

{"prompt": [{"role": "user", "content": "FD rates?"}], "completion": [{"role": "assistant", "content": "7.1% p.a. for one year."}]}
EOF
expect_ok "tokenize sft" "$FIMI" data tokenize --input "$WORK/sft.jsonl" --tokenizer "$WORK/tok.json" \
  --out "$WORK/sft.h5" --kind sft --json
cp "$WORK/out" "$WORK/sft_stats.json"
expect_true "3 rows of 4 lines" test "$(json_field "$WORK/sft_stats.json" '(d["rows"], d["lines"])')" = "(3, 4)"
expect_ok "info sft" "$FIMI" data info "$WORK/sft.h5" --json
cp "$WORK/out" "$WORK/sft_info.json"
expect_true "info: kind and rows" test "$(json_field "$WORK/sft_info.json" '(d["kind"], d["rows"], d["vocab_size"])')" = "('sft', 3, 600)"
expect_true "info tokens == tokenize tokens" test "$(json_field "$WORK/sft_info.json" 'd["fields"]["seq"]["tokens"]')" = \
  "$(json_field "$WORK/sft_stats.json" 'd["tokens"]')"
expect_true "info loss tokens == tokenize loss tokens" test \
  "$(json_field "$WORK/sft_info.json" 'd["fields"]["seq"]["loss_tokens"]')" = "$(json_field "$WORK/sft_stats.json" 'd["loss_tokens"]')"
expect_ok "info (text)" "$FIMI" data info "$WORK/sft.h5"
expect_true "info text names the kind" grep -q "sft dataset, 3 rows, vocab 600" "$WORK/out"
expect_ok "tokenize (text summary)" "$FIMI" data tokenize --input "$WORK/sft.jsonl" --tokenizer "$WORK/tok.json" \
  --out "$WORK/sft2.h5" --kind sft
expect_true "summary reports rows/s and tokens/s" grep -q "rows/s.*tokens/s" "$WORK/out"
"$FIMI" data info "$WORK/sft2.h5" --json | sed 's/"path":"[^"]*"//' >"$WORK/sft2_info.json"
expect_true "same input, same summary" test "$(sed 's/"path":"[^"]*"//' "$WORK/sft_info.json")" = "$(cat "$WORK/sft2_info.json")"

# Overlong rows: the longest seq is the conversation; max-length 16 cuts two rows (the plain one fits).
PLAIN_LEN="$(json_field "$WORK/sft_info.json" 'd["fields"]["seq"]["min_len"]')"
MAXLEN=$((PLAIN_LEN))
expect_ok "truncate" "$FIMI" data tokenize --input "$WORK/sft.jsonl" --tokenizer "$WORK/tok.json" --out "$WORK/t.h5" \
  --kind sft --max-length "$MAXLEN" --json
expect_true "2 truncated, 3 rows, longest == max" test "$(json_field "$WORK/out" '(d["truncated"], d["rows"], d["max_row_tokens"])')" = "(2, 3, $MAXLEN)"
expect_ok "drop" "$FIMI" data tokenize --input "$WORK/sft.jsonl" --tokenizer "$WORK/tok.json" --out "$WORK/d.h5" \
  --kind sft --max-length "$MAXLEN" --overlong drop --json
expect_true "2 dropped, 1 row" test "$(json_field "$WORK/out" '(d["dropped"], d["rows"])')" = "(2, 1)"
expect_ok "info drop" "$FIMI" data info "$WORK/d.h5" --json
expect_true "info: dropped count and max_length kept" test "$(json_field "$WORK/out" '(d["dropped"], d["max_length"])')" = "(2, $MAXLEN)"

# DPO: explicit prompt, implicit prompt, plain strings.
cat >"$WORK/dpo.jsonl" <<'EOF'
{"prompt": [{"role": "user", "content": "Block my card"}], "chosen": [{"role": "assistant", "content": "Blocked."}], "rejected": [{"role": "assistant", "content": "No."}]}
{"chosen": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}], "rejected": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Go away"}]}
{"prompt": "Q: 2+2?", "chosen": " 4", "rejected": " 5"}
EOF
expect_ok "tokenize dpo" "$FIMI" data tokenize --input "$WORK/dpo.jsonl" --tokenizer "$WORK/tok.json" \
  --out "$WORK/dpo.h5" --kind dpo
expect_ok "info dpo" "$FIMI" data info "$WORK/dpo.h5" --json
expect_true "dpo fields" test "$(json_field "$WORK/out" 'sorted(d["fields"])')" = "['chosen', 'prompt', 'rejected']"
expect_true "no loss on prompts" test "$(json_field "$WORK/out" 'd["fields"]["prompt"]["loss_tokens"]')" = 0
expect_true "loss on responses" test "$(json_field "$WORK/out" 'd["fields"]["chosen"]["loss_tokens"] > 0 and d["fields"]["rejected"]["loss_tokens"] > 0')" = True

# Malformed rows: the error names the file, line and field; nothing is written.
printf '{"prompt": "a", "completion": "b"}\n{"prompt": "a"}\n' >"$WORK/bad.jsonl"
expect_fail "missing completion" "bad.jsonl line 2" "$FIMI" data tokenize --input "$WORK/bad.jsonl" \
  --tokenizer "$WORK/tok.json" --out "$WORK/bad.h5" --kind sft
expect_true "error names the field" grep -q "completion" "$WORK/err"
expect_true "nothing written after a failure" test ! -e "$WORK/bad.h5" -a ! -e "$WORK/bad.h5.tmp"
printf '{"prompt": "a", "completion": "b"}\nnot json\n{"prompt": "a", "completion": "c"}\n' >"$WORK/bad2.jsonl"
expect_fail "bad JSON" "bad2.jsonl line 2" "$FIMI" data tokenize --input "$WORK/bad2.jsonl" \
  --tokenizer "$WORK/tok.json" --out "$WORK/bad.h5" --kind sft
expect_ok "--skip-bad" "$FIMI" data tokenize --input "$WORK/bad2.jsonl" --tokenizer "$WORK/tok.json" \
  --out "$WORK/skip.h5" --kind sft --skip-bad --json
expect_true "1 skipped, 2 rows" test "$(json_field "$WORK/out" '(d["skipped"], d["rows"])')" = "(1, 2)"
expect_true "the skipped row is reported" grep -q "line 2" "$WORK/err"
expect_fail "dpo row in sft mode" "line 1" "$FIMI" data tokenize --input "$WORK/dpo.jsonl" \
  --tokenizer "$WORK/tok.json" --out "$WORK/x.h5" --kind sft

# Usage errors and damaged files.
expect_fail "missing --kind" "--kind" "$FIMI" data tokenize --input "$WORK/sft.jsonl" --tokenizer "$WORK/tok.json" --out "$WORK/x.h5"
expect_fail "bad --kind" "not sft or dpo" "$FIMI" data tokenize --input "$WORK/sft.jsonl" --tokenizer "$WORK/tok.json" \
  --out "$WORK/x.h5" --kind grpo
expect_fail "bad --overlong" "truncate or drop" "$FIMI" data tokenize --input "$WORK/sft.jsonl" --tokenizer "$WORK/tok.json" \
  --out "$WORK/x.h5" --kind sft --overlong keep
expect_fail "bad --loss" "not model or all" "$FIMI" data tokenize --input "$WORK/sft.jsonl" --tokenizer "$WORK/tok.json" \
  --out "$WORK/x.h5" --kind sft --loss prompt
expect_fail "info of a JSONL file" "not an HDF5 file" "$FIMI" data info "$WORK/sft.jsonl"
head -c 1000 "$WORK/sft.h5" >"$WORK/cut.h5"
expect_fail "info of a truncated file" "cut.h5" "$FIMI" data info "$WORK/cut.h5"

cli_summary
