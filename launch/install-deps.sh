#!/usr/bin/env bash
# launch/install-deps.sh: installs what fimi needs on a Debian machine, only
# the packages that are missing. Usage: launch/install-deps.sh [--python]
#   --python also creates .venv with the interop test packages (pip).
# Sourced by demo.sh and test.sh; safe to run again.
set -euo pipefail

FIMI_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEBIAN_PACKAGES=(build-essential cmake pkg-config libopenblas-dev libopenblas-openmp-dev libcjson-dev libinih-dev libpcre2-dev libsqlite3-dev libmicrohttpd-dev libcurl4-openssl-dev libssl-dev libhdf5-dev libopenmpi-dev openmpi-bin libprotobuf-c-dev protobuf-c-compiler libisal-dev python3-venv gnuplot-nox)
# With --python (the test command) also clang and its libFuzzer runtime, for
# the fuzz smoke run of tests/fuzz/smoke.sh, and Slurm and munge for the
# one-node cluster of tests/slurm/cli_slurm.sh, these without their
# recommended packages (28 more: plugin -dev packages, ROCm, InfluxDB, ...).
SLURM_PACKAGES=()
if [ "${1:-}" = "--python" ]; then
  DEBIAN_PACKAGES+=(clang libclang-rt-14-dev)
  SLURM_PACKAGES=(slurm-wlm munge)
fi

install_missing() {  # install_missing [APT_FLAG...] -- PACKAGE...: apt-get installs those not installed yet
  local flags=() missing=() pkg
  while [ "$1" != -- ]; do flags+=("$1"); shift; done
  shift
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ "${#missing[@]}" -gt 0 ] || return 0
  echo "installing Debian packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${flags[@]}" "${missing[@]}" >/dev/null
}
install_missing -- "${DEBIAN_PACKAGES[@]}"
install_missing --no-install-recommends -- "${SLURM_PACKAGES[@]}"

# The optional cuDNN attention path (kernels/cuda/attention_cudnn.cpp) is
# written against NVIDIA's header-only cuDNN frontend, which is published on
# PyPI, not in Debian. With nvcc present, its headers (only) are fetched into
# .deps/ at a pinned version; without them the path builds as a stub that says
# so. Not fatal: the rest of fimi does not need them.
CUDNN_FRONTEND_VERSION=1.32.0
CUDNN_FRONTEND_DIR="$FIMI_ROOT/.deps/cudnn-frontend-$CUDNN_FRONTEND_VERSION"
if { command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; } &&
   [ ! -f "$CUDNN_FRONTEND_DIR/include/cudnn_frontend.h" ]; then
  bash "$FIMI_ROOT/launch/fetch-cudnn-frontend.sh" "$CUDNN_FRONTEND_VERSION" "$CUDNN_FRONTEND_DIR" ||
    echo "warning: cuDNN frontend headers not fetched; cuda.attention = cudnn will be unavailable" >&2
fi

if [ "${1:-}" = "--python" ]; then
  if [ ! -x "$FIMI_ROOT/.venv/bin/python" ]; then
    python3 -m venv "$FIMI_ROOT/.venv"
  fi
  # torch/transformers are optional (large): hf_parity.py skips without them.
  # tensorboard reads back fimi's event files (tests/interop/test_tensorboard_interop.py);
  # mlflow runs a tracking server and reads fimi's runs back (tests/interop/test_mlflow_interop.py);
  # openai is the client of fimi serve (tests/interop/test_serve_openai.py).
  "$FIMI_ROOT/.venv/bin/pip" install -q --disable-pip-version-check pytest numpy safetensors tokenizers h5py mcp \
    tensorboard mlflow openai
fi
