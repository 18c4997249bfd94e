#!/usr/bin/env bash
# test.sh: builds fimi from scratch and runs every test: ctest (C unit and
# CLI tests), the same parser tests under ASan+UBSan, a 30 s fuzz of each
# parser, then pytest (interop with the Python safetensors library, and the
# Hugging Face parity test when torch/transformers are installed in .venv).
set -euo pipefail
cd "$(dirname "$0")"
bash launch/install-deps.sh --python
BUILD_DIR="${FIMI_BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
(cd "$BUILD_DIR" && ctest --output-on-failure -j"$(nproc)")
# The parsers of untrusted input (files, model output, tool calls) again under
# AddressSanitizer + UBSan: every malformed case must be rejected without a
# memory error. The CLI scripts run against the sanitized binary too.
ASAN_DIR="${BUILD_DIR}-asan"
ASAN_TESTS=(test_core test_safetensors test_gemma_config test_weights test_decode test_tokenizer test_bpe_train
            test_chat test_toolcall test_env_db test_env_tools test_env_knowledge test_env_task test_env_episode
            test_env_families_b test_dataset test_ops_adamw test_optim test_dpo_loss test_dist_shard mpi_comm_test
            test_train_sft test_train_loop test_model_hooks zero3_test test_dpo_train test_gemma_cuda_standin
            test_gpu_train_standin)
cmake -S . -B "$ASAN_DIR" -DCMAKE_BUILD_TYPE=Debug -DFIMI_SANITIZE=ON -DFIMI_CUDA=OFF >/dev/null
cmake --build "$ASAN_DIR" -j"$(nproc)" --target fimi fimi_standin "${ASAN_TESTS[@]}"
(cd "$ASAN_DIR" && ctest --output-on-failure -j"$(nproc)" -R "^($(IFS='|'; echo "${ASAN_TESTS[*]}")|cli_.*|mpi_comm_.*|mpi_zero3_tiny.*)\$")
# A short libFuzzer run of every fuzz target (tests/fuzz/smoke.sh lists them).
tests/fuzz/smoke.sh 30
FIMI_BUILD_DIR="$PWD/$BUILD_DIR" FIMI_BIN="$PWD/$BUILD_DIR/cmd/fimi" .venv/bin/python -m pytest -q tests/interop
