# dpllm — the two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: demo test check format install install-dev clean bench fuzz

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PIP) install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(PIP) install --quiet -e ".[dev]"
	touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

demo: $(VENV)/.installed
	$(VENV)/bin/dpllm weekly --demo

check: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check dpllm tests bench examples
	$(VENV)/bin/ruff format --check dpllm tests bench examples
	$(VENV)/bin/mypy
	$(VENV)/bin/dpllm templates lint

test: check
	$(PY) -m pytest

format: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check --fix dpllm tests bench examples
	$(VENV)/bin/ruff format dpllm tests bench examples

# The server against its own OpenAPI document, every schemathesis check, 500 examples an
# operation (the suite runs 25); then the hand-written property test.
fuzz: $(VENV)/.installed-dev
	DPLLM_FUZZ_EXAMPLES=500 $(PY) -m pytest -p no:randomly -q \
		tests/server/test_schemathesis.py tests/server/test_openapi_fuzz.py

bench: $(VENV)/.installed-dev
	$(PY) bench/ledger_bench.py
	$(PY) bench/stats_bench.py
	$(PY) bench/redact_bench.py
	$(PY) bench/proxy_bench.py

clean:
	rm -rf $(VENV) build dist .mypy_cache .ruff_cache .pytest_cache demo-out dpllm-demo
