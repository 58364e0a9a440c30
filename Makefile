# dpllm — the two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: demo test check docs format install install-dev clean bench mutate fuzz

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# The demo's weekly report draws charts: the core plus the charts extra.
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PIP) install --quiet -e ".[charts]"
	touch $@

# The docs site needs only the core and the docs tools (not the whole dev extra).
$(VENV)/.installed-docs: pyproject.toml | $(PY)
	$(PIP) install --quiet -e ".[docs]"
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(PIP) install --quiet -e ".[dev]"
	touch $(VENV)/.installed $(VENV)/.installed-docs $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

demo: $(VENV)/.installed
	$(VENV)/bin/dpllm weekly --demo
	@echo "next: . $(VENV)/bin/activate (or $(VENV)/bin/dpllm), then dpllm --help and dpllm quickstart; docs: make docs"

check: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check dpllm tests bench examples scripts
	$(VENV)/bin/ruff format --check dpllm tests bench examples scripts
	$(VENV)/bin/mypy
	$(VENV)/bin/dpllm templates lint
	$(VENV)/bin/mkdocs build --strict --quiet --site-dir build/site

test: check
	$(PY) -m pytest

# The documentation site, served while you edit docs/ (http://127.0.0.1:8000).
docs: $(VENV)/.installed-docs
	$(VENV)/bin/mkdocs serve

format: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check --fix dpllm tests bench examples scripts
	$(VENV)/bin/ruff format dpllm tests bench examples scripts

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

# Mutation testing of the promise-carrying modules (~30 min on 2 cores); see docs/mutation.md.
mutate: $(VENV)/.installed-dev
	$(PY) scripts/mutate.py $(GROUPS)

clean:
	rm -rf $(VENV) build dist mutants .mypy_cache .ruff_cache .pytest_cache demo-out dpllm-demo
