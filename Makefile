# The README's two commands: `make demo` and `make test`. Both set everything up
# (Debian packages if missing, .venv, pinned pip installs, the C++ build) and are
# incremental: a second run reinstalls nothing and rebuilds only what changed.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.requirements-stamp
PYTEST_ARGS ?=

.PHONY: setup build test demo bench check-cuda clean

setup: build

$(STAMP): requirements.txt tools/system-deps.sh
	bash tools/system-deps.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

# Editable install; CMake rebuilds incrementally in build/<wheel tag>.
build: $(STAMP)
	$(PY) -m pip install --quiet --no-build-isolation --no-deps -e .

test: build
	$(PY) -m pytest $(PYTEST_ARGS)

demo: build
	$(VENV)/bin/vaetransfer quickstart --out runs/quickstart

bench: build
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

# Compile-checks every CUDA source with the machine's nvcc (no GPU needed).
check-cuda:
	bash tools/check-cuda.sh

clean:
	rm -rf build runs
