# make demo / make test / make bench: each creates .venv and installs jitgrad itself if needed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev
EXAMPLES_STAMP := $(VENV)/.installed-examples

.PHONY: demo quickstart test test-all lint bench kernels clean

$(STAMP): pyproject.toml setup.py jitgrad/_fastops.c
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e ".[dev]"
	touch $(STAMP)

$(EXAMPLES_STAMP): $(STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check -e ".[dev,examples]"
	touch $(EXAMPLES_STAMP)

demo: $(EXAMPLES_STAMP)  # trains an MLP and a CNN on scikit-learn's digits
	$(BIN)/python examples/train_digits.py

quickstart: $(STAMP)
	$(BIN)/python examples/quickstart.py

# the suite logs every CUDA kernel its simulator tests launch; each is then compiled for a
# GPU (sm_90) with NVVM, which the simulator never does (tools/cuda_ptx_check.py)
LAUNCH_LOG := $(CURDIR)/$(VENV)/cuda-launches.jsonl

# the suite runs on TEST_WORKERS processes (pytest-xdist; each file's tests on one of them):
# the usable CPUs, at most 4 (each holds ~1.5 GB). On the 2-core development machine, with
# torch installed: 13.2 min on one process, 8.6 min on two. TEST_WORKERS=0: one process.
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(min(len(os.sched_getaffinity(0)), 4))" 2>/dev/null || echo 2)

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m jitgrad.kernels.vmath --check
	rm -f $(LAUNCH_LOG)
	JITGRAD_CUDA_LAUNCH_LOG=$(LAUNCH_LOG) $(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile
	$(BIN)/python tools/cuda_ptx_check.py --cc 9.0 $(if $(CI),--require) $(LAUNCH_LOG)

test-all: $(STAMP)  # includes the slow sweeps (dense ulp sweeps: ~15 min)
	$(BIN)/pytest -m "slow or not slow"

lint: $(STAMP)
	$(BIN)/ruff check .

kernels: $(STAMP)
	$(BIN)/python -m jitgrad.kernels.vmath

bench: $(STAMP)
	cd asv_benchmarks && ../$(BIN)/asv machine --yes >/dev/null && \
		../$(BIN)/asv run --python=same --quick --show-stderr
	$(BIN)/python asv_benchmarks/compare.py --quick

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache asv_benchmarks/.asv
