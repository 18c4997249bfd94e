#!/usr/bin/env bash
# tests/cli_text.sh: text in and out of the `fimi` command: train a
# tokenizer, give it to a model (`init --tokenizer`), encode/decode, and
# generate from a text prompt with streamed output (plain and --chat), plus
# the errors for a missing or mismatched tokenizer. Usage: cli_text.sh PATH/TO/fimi
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
expect_ok "init with tokenizer" "$FIMI" init --preset tiny --seed 3 --tokenizer "$WORK/tok.json" --out "$WORK/m"
expect_true "tokenizer.json copied byte for byte" cmp "$WORK/tok.json" "$WORK/m/tokenizer.json"
expect_true "vocab sized to the tokenizer" test "$(json_field "$WORK/m/config.json" 'd["vocab_size"]')" = 600
expect_true "eos ids are <eos> and <end_of_turn>" test "$(json_field "$WORK/m/config.json" 'd["eos_token_id"]')" = "[1, 5]"

PROMPT='Namaste! Mera FD ₹2,00,000.50 ka hai 🙏'
expect_ok "encode" "$FIMI" tokenizer encode --tokenizer "$WORK/m/tokenizer.json" --text "$PROMPT" --add-special
IDS="$(tr -d ' \n' <"$WORK/out")"
expect_true "encode starts with <bos>" test "${IDS%%,*}" = 2
expect_ok "decode" "$FIMI" tokenizer decode --tokenizer "$WORK/m/tokenizer.json" --ids "$IDS" --skip-special
expect_true "decode(encode(x)) == x" test "$(cat "$WORK/out")" = "$PROMPT"

# Streaming prints the same text as the JSON's "text" (same seed), and the
# JSON prompt ids equal the tokenizer's encoding.
expect_ok "generate text (streamed)" "$FIMI" generate --model "$WORK/m" --prompt "$PROMPT" --max-new 24 \
  --temperature 1 --seed 9 --no-stop
cp "$WORK/out" "$WORK/streamed"
expect_ok "generate text (json)" "$FIMI" generate --model "$WORK/m" --prompt "$PROMPT" --max-new 24 \
  --temperature 1 --seed 9 --no-stop --json
cp "$WORK/out" "$WORK/gen.json"
expect_true "streamed text == decoded text" test "$(cat "$WORK/streamed")" = "$(json_field "$WORK/gen.json" 'd["completions"][0]["text"]')"
expect_true "24 tokens generated" test "$(json_field "$WORK/gen.json" 'len(d["completions"][0]["generated"])')" = 24
expect_true "prompt ids are the tokenizer's" test \
  "$(json_field "$WORK/gen.json" '",".join(map(str, d["completions"][0]["prompt"]))')" = "$IDS"

# --chat: <bos><start_of_turn>user\n ... <end_of_turn>\n<start_of_turn>model\n
expect_ok "generate --chat" "$FIMI" generate --model "$WORK/m" --chat --prompt "FD rates?" --max-new 4 --json
cp "$WORK/out" "$WORK/chat.json"
expect_true "chat prompt starts <bos><start_of_turn>" test \
  "$(json_field "$WORK/chat.json" 'd["completions"][0]["prompt"][:2]')" = "[2, 4]"
expect_ok "decode chat prompt" "$FIMI" tokenizer decode --tokenizer "$WORK/m/tokenizer.json" \
  --ids "$(json_field "$WORK/chat.json" '",".join(map(str, d["completions"][0]["prompt"]))')"
expect_true "chat prompt text" test "$(cat "$WORK/out")" = "$(printf '<bos><start_of_turn>user\nFD rates?<end_of_turn>\n<start_of_turn>model')"

# Errors name the problem.
expect_ok "init without tokenizer" "$FIMI" init --preset tiny --out "$WORK/bare"
expect_fail "text prompt without tokenizer" "tokenizer.json" "$FIMI" generate --model "$WORK/bare" --prompt "hi"
expect_ok "bigger tokenizer" "$FIMI" tokenizer train --input "$SRC/tests/interop/tokenizer_corpus.txt" \
  --vocab-size 1200 --out "$WORK/big.json"
expect_fail "tokenizer ids beyond the model's vocab" "outside the model's vocabulary" \
  "$FIMI" generate --model "$WORK/m" --tokenizer "$WORK/big.json" --prompt "$PROMPT"
echo '{"model": {"type": "Unigram"}}' >"$WORK/bad.json"
expect_fail "init with a bad tokenizer" "bad.json" "$FIMI" init --preset tiny --tokenizer "$WORK/bad.json" --out "$WORK/x"
expect_true "no model written after a failed init" test ! -e "$WORK/x/config.json"

cli_summary
