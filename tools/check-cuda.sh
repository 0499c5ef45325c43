#!/usr/bin/env bash
# Compile-checks every CUDA source (csrc/**/cuda/*.cu) with nvcc alone, no GPU and
# no CUDA torch needed: kernels are self-contained CUDA C++ behind a raw-pointer
# launcher, so this catches rot on CPU-only machines. Exits non-zero only when a
# source does not compile; without nvcc it skips (exit 0), as CI runs it everywhere.
# nvcc: $NVCC when set (a path or a command name), else nvcc on PATH, else
# ${CUDA_HOME:-/usr/local/cuda}/bin/nvcc.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${NVCC:-}" ]; then
  nvcc=$(command -v "$NVCC" || true)
else
  nvcc=$(command -v nvcc || command -v "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" || true)
fi
if [ -z "$nvcc" ]; then
  echo "check-cuda: skipped: no nvcc${NVCC:+ (NVCC=$NVCC is not an executable)}"
  exit 0
fi
ARCH=${CUDA_ARCH:-sm_80}
mapfile -t sources < <(find csrc -path '*/cuda/*.cu' | sort)
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
failed=0
for f in "${sources[@]}"; do
  if "$nvcc" -std=c++17 -arch="$ARCH" -O2 -Icsrc -c "$f" -o "$out/$(basename "$f").o"; then
    echo "check-cuda: ok   $f"
  else
    echo "check-cuda: FAIL $f"; failed=1
  fi
done
echo "check-cuda: ${#sources[@]} CUDA source(s) compiled with $("$nvcc" --version | tail -1)"
exit $failed
