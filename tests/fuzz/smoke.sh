#!/usr/bin/env bash
# tests/fuzz/smoke.sh: a short libFuzzer run of every fuzz target on the seed
# corpus, so each CI run re-fuzzes the parsers of untrusted files for a
# little while (the long runs are documented in docs/fuzzing.md).
# Usage: tests/fuzz/smoke.sh [SECONDS_PER_TARGET]   (needs clang + libclang-rt-14-dev)
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-30}"
dir="build-fuzz-smoke"
CC=clang cmake -S . -B "$dir" -DFIMI_FUZZ=ON -DFIMI_TESTS=ON -DFIMI_CUDA=OFF >/dev/null
cmake --build "$dir" -j"$(nproc)" --target fuzz_safetensors fuzz_config_json
python3 tests/fuzz/make_corpus.py "$dir/seeds" >/dev/null
mkdir -p "$dir/corpus/safetensors" "$dir/corpus/config" "$dir/artifacts"
"$dir/tests/fuzz/fuzz_safetensors" -max_total_time="$seconds" -dict=tests/fuzz/safetensors.dict \
  -artifact_prefix="$dir/artifacts/" "$dir/corpus/safetensors" "$dir/seeds/safetensors" 2>"$dir/safetensors.log" \
  || { tail -40 "$dir/safetensors.log"; exit 1; }
"$dir/tests/fuzz/fuzz_config_json" -max_total_time="$seconds" -dict=tests/fuzz/config.dict \
  -artifact_prefix="$dir/artifacts/cfg-" "$dir/corpus/config" "$dir/seeds/config" 2>"$dir/config.log" \
  || { tail -40 "$dir/config.log"; exit 1; }
for log in "$dir/safetensors.log" "$dir/config.log"; do
  echo "fuzz smoke: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$log" || echo "$log: no summary")"
done
