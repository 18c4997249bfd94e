#!/usr/bin/env bash
# test.sh: builds fimi from scratch and runs every test: ctest (C unit and
# CLI tests) then pytest (interop with the Python safetensors library, and the
# Hugging Face parity test when torch/transformers are installed in .venv).
set -euo pipefail
cd "$(dirname "$0")"
bash launch/install-deps.sh --python
BUILD_DIR="${FIMI_BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
(cd "$BUILD_DIR" && ctest --output-on-failure -j"$(nproc)")
FIMI_BUILD_DIR="$PWD/$BUILD_DIR" FIMI_BIN="$PWD/$BUILD_DIR/cmd/fimi" .venv/bin/python -m pytest -q tests/interop
