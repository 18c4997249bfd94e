#!/usr/bin/env bash
# launch/fetch-cudnn-frontend.sh VERSION DIR: puts the headers of NVIDIA's
# cuDNN frontend (header-only C++ API of cuDNN's graph) into DIR/include, from
# the PyPI wheel nvidia-cudnn-frontend==VERSION. Any wheel of a version holds
# the same headers, so one fixed platform tag is asked for: the result does not
# depend on this machine's Python. Uses a throwaway venv (Debian's python3 has
# no pip of its own).
set -euo pipefail
version="$1"
dir="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
timeout 300 "$tmp/venv/bin/pip" download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version 3.11 --implementation cp --platform manylinux_2_28_x86_64 \
  -d "$tmp" "nvidia-cudnn-frontend==$version"
wheel="$(ls "$tmp"/nvidia_cudnn_frontend-*.whl)"
mkdir -p "$dir.partial"
python3 - "$wheel" "$dir.partial" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    names = [n for n in z.namelist() if n.startswith("include/")]
    if not any(n.endswith("cudnn_frontend.h") for n in names):
        sys.exit("no include/cudnn_frontend.h in " + sys.argv[1])
    for n in names:
        z.extract(n, sys.argv[2])
PY
rm -rf "$dir"
mv "$dir.partial" "$dir"
echo "cuDNN frontend $version headers in $dir/include"
