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

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m jitgrad.kernels.vmath --check
	$(BIN)/pytest

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
