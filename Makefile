# The lab's single entry point. `make demo` and `make test` set up a virtual
# environment with every dependency on first use (and again when
# pyproject.toml changes), then run.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint fields clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "the lab needs Python 3.11 or newer (set PYTHON=...)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

## demo: run the demo scenario on the embedded fakeredis and print its invariant summary
demo: $(STAMP)
	$(BIN)/python -m simulator run data/scenarios/demo.toml

## test: lint, then the whole suite (real-Redis and PostgreSQL tests use throwaway servers when installed)
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .

## fields: regenerate the scenario field reference in docs/
fields: $(STAMP)
	$(BIN)/python -m simulator fields > docs/scenario-fields.txt

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis data/results
