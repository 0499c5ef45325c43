#!/usr/bin/env bash
# Compile-checks every CUDA source (csrc/**/cuda/*.cu) with nvcc alone, no GPU and
# no CUDA torch needed: kernels are self-contained CUDA C++ behind a raw-pointer
# launcher, so this catches rot on CPU-only machines. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC=${NVCC:-$(command -v nvcc || true)}
if [ -z "$NVCC" ]; then
  echo "check-cuda: nvcc not found; set NVCC=/path/to/nvcc" >&2
  exit 1
fi
ARCH=${CUDA_ARCH:-sm_80}
mapfile -t sources < <(find csrc -path '*/cuda/*.cu' | sort)
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
failed=0
for f in "${sources[@]}"; do
  if "$NVCC" -std=c++20 -arch="$ARCH" -O2 -Icsrc -c "$f" -o "$out/$(basename "$f").o"; then
    echo "check-cuda: ok   $f"
  else
    echo "check-cuda: FAIL $f"; failed=1
  fi
done
echo "check-cuda: ${#sources[@]} CUDA source(s) compiled with $("$NVCC" --version | tail -1)"
exit $failed
