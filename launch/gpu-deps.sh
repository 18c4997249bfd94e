#!/usr/bin/env bash
# launch/gpu-deps.sh: prepares .gpudeps/root, the libraries a lent GPU machine
# lacks for the FIMI_GPU_CHECK build (docs/gpu-check.md): OpenBLAS (OpenMP
# build) with libgfortran5 and libquadmath0, cJSON, inih, and pkgconf in case
# the image has no pkg-config, and the headers of the optional cuDNN attention
# path (cuDNN frontend and cudnn*.h). Run it HERE (a Debian machine with apt and a
# network), before a device session; the device has neither.
#
# The .deb files are fetched with `apt-get download` and unpacked with
# `dpkg -x` (nothing is installed here), then made relocatable: the .pc files
# use ${pcfiledir}, cJSON's CMake files use their own directory, symlinks are
# relative. Documentation, static archives and the LAPACK/BLAS aliases are
# dropped and OpenBLAS is gzipped, so the carried folder is about 14 MiB. .gpudeps/ is ignored through
# .git/info/exclude so it travels only when a `run` names it in `carry`.
# Usage: launch/gpu-deps.sh   (safe to run again: it rebuilds .gpudeps/root)
set -euo pipefail

FIMI_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="$FIMI_ROOT/.gpudeps"
ROOT="$DEPS/root"
ARCH_DIR=x86_64-linux-gnu
PACKAGES=(libopenblas0-openmp libopenblas-openmp-dev libgfortran5 libquadmath0
          libcjson1 libcjson-dev libinih1 libinih-dev pkgconf-bin libpkgconf3)

# Ignore .gpudeps/ in this checkout only (not in the shared .gitignore).
exclude="$(git -C "$FIMI_ROOT" rev-parse --git-path info/exclude)"
case "$exclude" in /*) ;; *) exclude="$FIMI_ROOT/$exclude" ;; esac
mkdir -p "$(dirname "$exclude")"
touch "$exclude"
grep -qxF '/.gpudeps/' "$exclude" || echo '/.gpudeps/' >>"$exclude"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# apt-get download as root warns that _apt cannot write the folder: harmless.
(cd "$work" && apt-get download "${PACKAGES[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
count=$(ls "$work"/*.deb 2>/dev/null | wc -l)
if [ "$count" -ne "${#PACKAGES[@]}" ]; then
  echo "gpu-deps: expected ${#PACKAGES[@]} .deb files, got $count (apt-get update first?)" >&2
  exit 1
fi

rm -rf "$ROOT"
mkdir -p "$ROOT"
for deb in "$work"/*.deb; do
  dpkg -x "$deb" "$ROOT"
  echo "  $(basename "$deb")"
done

usr="$ROOT/usr"
lib="$usr/lib/$ARCH_DIR"
blas="$lib/openblas-openmp"

# Drop what the build never reads: docs, static archives, the BLAS/LAPACK
# aliases (fimi links libopenblas itself), OpenBLAS's CMake config (absolute
# paths; the build uses pkg-config), the C++ INIReader.
rm -rf "$usr/share/doc" "$usr/share/lintian" "$usr/share/man"
find "$ROOT" -name '*.a' -delete
rm -f "$blas"/libblas.* "$blas"/liblapack.* "$blas"/pkgconfig/blas-openblas.pc "$blas"/pkgconfig/lapack-openblas.pc
rm -rf "$blas/cmake" "$lib/cmake/openblas"
rm -f "$usr"/include/INIReader.h "$lib"/libINIReader.* "$lib"/pkgconfig/INIReader.pc

# Absolute symlinks would point into the device's own /usr: make every link relative.
find "$ROOT" -type l | while read -r link; do
  target="$(readlink "$link")"
  case "$target" in
    /*)
      if [ -e "$ROOT$target" ]; then
        ln -sfn "$(realpath --relative-to="$(dirname "$link")" "$ROOT$target")" "$link"
      else
        echo "gpu-deps: dropping dangling link ${link#"$ROOT"/} -> $target"
        rm -f "$link"
      fi
      ;;
  esac
done
# The library is 35 MiB (every CPU's kernels, DYNAMIC_ARCH): gzip it to about
# 10 MiB for the trip. tests/gpu/check.sh unpacks it into its build folder as
# libopenblas.so.0 (+ libopenblas.so), so this folder stays small after a run.
so="$(cd "$blas" && ls libopenblasp-r*.so | head -1)"
rm -f "$blas/libopenblas.so.0" "$blas/libopenblas.so"
gzip -9 "$blas/$so"
# pkg-config under its usual name, for images that lack it.
ln -sfn pkgconf "$usr/bin/pkg-config"

# pkg-config files relative to their own location (${pcfiledir}).
sed -i -e "s#^libdir=.*#libdir=\${pcfiledir}/..#" \
  -e "s#^includedir=.*#includedir=\${pcfiledir}/../../../../include/$ARCH_DIR/openblas-openmp#" \
  "$blas/pkgconfig/openblas.pc"
for pc in "$lib"/pkgconfig/*.pc; do
  sed -i -e "s#=/usr/#=\${pcfiledir}/../../../#" -e "s#=/usr\$#=\${pcfiledir}/../../..#" "$pc"
done

# cJSON's CMake package: /usr becomes the directory four levels above the file.
for f in "$lib"/cmake/cJSON/*.cmake; do
  sed -i -e 's#"/usr/#"${_fimi_gpudeps_usr}/#g' -e 's#"/usr"#"${_fimi_gpudeps_usr}"#g' "$f"
  sed -i -e '1i get_filename_component(_fimi_gpudeps_usr "${CMAKE_CURRENT_LIST_DIR}/../../../.." ABSOLUTE)' "$f"
done

# Check: nothing may still name the build machine's /usr.
if grep -rIl '"/usr\|=/usr' "$lib/pkgconfig" "$blas/pkgconfig" "$lib/cmake" 2>/dev/null; then
  echo "gpu-deps: absolute /usr paths left in the files above" >&2
  exit 1
fi
if find "$ROOT" -type l -lname '/*' | grep -q .; then
  echo "gpu-deps: absolute symlinks left" >&2
  exit 1
fi

# The optional cuDNN attention path: the cuDNN frontend's headers (fetched by
# install-deps.sh into .deps/) and cuDNN's own headers; the device has the
# library itself beside PyTorch (check.sh finds it), not necessarily these.
frontend="$(ls -d "$FIMI_ROOT"/.deps/cudnn-frontend-*/include 2>/dev/null | tail -1)"
rm -rf "$DEPS/cudnn-frontend" "$DEPS/cudnn-include"
if [ -n "$frontend" ] && ls /usr/local/cuda/include/cudnn*.h >/dev/null 2>&1; then
  mkdir -p "$DEPS/cudnn-frontend" "$DEPS/cudnn-include"
  cp -r "$frontend" "$DEPS/cudnn-frontend/include"
  cp /usr/local/cuda/include/cudnn*.h "$DEPS/cudnn-include/"
  echo "gpu-deps: cuDNN frontend headers from $frontend, cuDNN headers from /usr/local/cuda/include"
else
  echo "gpu-deps: no cuDNN frontend headers (run launch/install-deps.sh) or cudnn.h: the cuDNN path will build as a stub"
fi

size_kib=$(du -sk "$DEPS" | cut -f1)
echo "gpu-deps: $ROOT ready, $((size_kib / 1024)) MiB ($size_kib KiB); carry \".gpudeps\" (limit 64 MiB with the tree)"
if [ "$size_kib" -gt $((24 * 1024)) ]; then
  echo "gpu-deps: larger than 24 MiB, expected about 18" >&2
  exit 1
fi
