#!/usr/bin/env bash
# Builds and smoke-tests vaetransfer against another torch than the README's pinned CPU 2.13,
# in a separate virtual environment and build folder (the main .venv and build/ stay as they are).
# With a CUDA torch and an nvcc of the same CUDA major version, the whole extension is compiled
# and linked WITH CUDA (the CUDA sources included), as on a GPU machine; nothing needs a GPU.
#
#   tools/build-against-torch.sh                       # torch==2.11.0 (CUDA 13.0) from the package index
#   TORCH_SPEC=torch==2.12.0 tools/build-against-torch.sh
#   TORCH_WHEELS=/path/to/wheels tools/build-against-torch.sh   # torch and its nvidia-* wheels from there only
#   tools/build-against-torch.sh --if-wheels           # CI: skip (exit 0, with a message) unless TORCH_WHEELS is set
#
# Environment: TORCH_SPEC (default torch==2.11.0), TORCH_WHEELS (a folder of wheels: no index is
# used), VENV (default build/against-<spec>/venv), TORCH_CUDA_ARCH_LIST (the architectures, as
# torch's CMake config takes them; default "8.0;9.0": A100 and H100/H200; without it torch would
# look for a GPU to detect), NVCC (default: ${CUDA_HOME:-/usr/local/cuda}/bin/nvcc, else nvcc on PATH).
# Exit status: 0 built and checked (or skipped with --if-wheels), non-zero otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

spec=${TORCH_SPEC:-torch==2.11.0}
tag=$(echo "$spec" | sed 's/[^A-Za-z0-9.]\{1,\}/-/g')
root=build/against-$tag
venv=${VENV:-$root/venv}
archs=${TORCH_CUDA_ARCH_LIST:-8.0;9.0}

if [ "${1:-}" = "--if-wheels" ]; then
  if [ -z "${TORCH_WHEELS:-}" ] || ! ls "$TORCH_WHEELS"/torch-*.whl >/dev/null 2>&1; then
    echo "build-against-torch: skipped: set TORCH_WHEELS to a folder holding the $spec wheel (and its nvidia-* wheels)"
    exit 0
  fi
fi

pip_from=()
if [ -n "${TORCH_WHEELS:-}" ]; then pip_from=(--no-index --find-links "$TORCH_WHEELS"); fi

mkdir -p "$root"
echo "build-against-torch: $spec into $venv"
test -x "$venv/bin/python" || python3 -m venv "$venv"
py="$venv/bin/python"
# torch first (with its CUDA runtime wheels), then the build tools and what the smoke tests need,
# pinned as in requirements.txt.
"$py" -m pip install --quiet "${pip_from[@]}" "$spec"
grep -E '^(numpy|tqdm|matplotlib|scikit-build-core|ninja|cmake|cmeel-eigen|cmeel|pytest|scikit-learn|scipy|joblib|threadpoolctl)==' \
  requirements.txt > "$root/requirements.txt"
"$py" -m pip install --quiet ${TORCH_WHEELS:+--find-links "$TORCH_WHEELS"} -r "$root/requirements.txt"

read -r torch_version torch_cuda < <("$py" -c "import torch; print(torch.__version__, torch.version.cuda or '-')")
echo "build-against-torch: torch $torch_version, built with CUDA $torch_cuda"

cmake_args=()
if [ "$torch_cuda" != "-" ]; then
  # The toolkit's own nvcc (torch's CMake finds the toolkit from it; a wrapper on PATH would hide it).
  if [ -n "${NVCC:-}" ]; then nvcc=$(command -v "$NVCC" || true); else
    nvcc=$(command -v "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" || command -v nvcc || true); fi
  if [ -z "$nvcc" ]; then
    echo "build-against-torch: FAIL: torch has CUDA $torch_cuda but there is no nvcc to compile the CUDA sources"
    exit 1
  fi
  nvcc_cuda=$("$nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
  # The CUDA sources must be compiled by the CUDA major version torch links against (a minor
  # version may differ: CUDA's minor-version compatibility); else the extension is not loadable.
  if [ "${nvcc_cuda%%.*}" != "${torch_cuda%%.*}" ]; then
    echo "build-against-torch: FAIL: nvcc is CUDA $nvcc_cuda, torch was built with CUDA $torch_cuda (major versions differ)"
    exit 1
  fi
  echo "build-against-torch: nvcc $nvcc ($nvcc_cuda) matches torch's CUDA $torch_cuda; architectures $archs"
  toolkit=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
  cmake_args=(-DCMAKE_CUDA_COMPILER="$nvcc" -DCUDA_TOOLKIT_ROOT_DIR="$toolkit")
  export TORCH_CUDA_ARCH_LIST="$archs"
fi

# A build folder of its own: the wheel tag is the same for every torch, build/<tag> is the main one.
start=$(date +%s)
if ! CMAKE_ARGS="${cmake_args[*]}" "$py" -m pip install --no-build-isolation --no-deps \
    -C build-dir="$root/{wheel_tag}" . > "$root/build.log" 2>&1; then
  grep -v '^WARNING: Location' "$root/build.log" | tail -n 40
  echo "build-against-torch: FAIL: the build did not succeed (log: $root/build.log)"
  exit 1
fi
echo "build-against-torch: built in $(( $(date +%s) - start )) s (log: $root/build.log)"

# Checks, from outside the source tree so that the installed package is the one imported.
(cd "$root" && "$py" - "$torch_version" "$torch_cuda" <<'EOF'
import sys, json
import torch, vaetransfer
info = vaetransfer.build_info()
print("build-against-torch: vaetransfer.build_info() =", json.dumps(info))
want_version, want_cuda = sys.argv[1], sys.argv[2]
assert info["torch"] == want_version, (info["torch"], want_version)
assert want_version.startswith(info["torch_compiled"]), ("compiled against", info["torch_compiled"])
assert info["cuda"] == (want_cuda != "-"), ("CUDA sources compiled in", info["cuda"], "torch CUDA", want_cuda)
assert vaetransfer.__file__.find("site-packages") >= 0, vaetransfer.__file__
EOF
)
# CPU smoke of the compiled core under this torch (a GPU's own tests run wherever one is lent:
# the device tests are parametrised over what torch reports).
(cd "$root" && "$py" -m pytest -q -p no:cacheprovider --rootdir "$OLDPWD" \
  "$OLDPWD/tests/test_build.py" "$OLDPWD/tests/test_similarity.py" "$OLDPWD/tests/test_devices.py" \
  "$OLDPWD/tests/test_intervals.py" -k "not notebook" 2>&1 | tail -n 4)
echo "build-against-torch: ok ($spec, CUDA sources $( [ "$torch_cuda" != "-" ] && echo on || echo off))"
