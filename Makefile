# The lab's single entry point. `make demo` and `make test` set up a virtual
# environment with every dependency on first use (and again when
# pyproject.toml changes), then run.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test compiled fuzz-scenarios lab lint fields clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "the lab needs Python 3.11 or newer (set PYTHON=...)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

## compiled: compile the hot path with Cython into build/compiled/ (only what changed;
## without a C compiler, one line says the lab runs interpreted and make goes on)
compiled: $(STAMP)
	@LAB_INTERPRETED=1 $(BIN)/python -m simulator.compiled.build

## demo: run the demo scenario on the lab's engine (a throwaway Valkey from its wheel; fakeredis
## where none installs) and print its invariant summary
demo: $(STAMP) compiled
	$(BIN)/python -m simulator run data/scenarios/demo.toml

## test: lint, then the whole suite on every core (real-Redis and PostgreSQL tests use throwaway servers when installed)
TEST_WORKERS ?= auto
test: $(STAMP) compiled
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

## fuzz-scenarios: the malformed-scenario property test at length, randomized (LAB_FUZZ_EXAMPLES checks, a twentieth as many runs)
LAB_FUZZ_EXAMPLES ?= 5000
fuzz-scenarios: $(STAMP)
	LAB_FUZZ_EXAMPLES=$(LAB_FUZZ_EXAMPLES) $(BIN)/python -m pytest -q \
		tests/simulator/test_malformed_scenarios.py -k answers_any_malformed

# JupyterLab and its notebook extras, on first use of `make lab`.
LAB_STAMP := $(VENV)/.installed-notebooks
# Jupyter's configuration (committed: .jupyter/jupyter_server_config.py and
# labconfig/), its data and JupyterLab's settings and workspaces, all under
# .jupyter/ in the checkout: `make lab` reads and writes nothing in ~/.jupyter.
JUPYTER_HOME := $(CURDIR)/.jupyter

$(LAB_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,notebooks]'
	@touch $(LAB_STAMP)

## lab: open JupyterLab on notebooks/, each .py there opening as a notebook (configuration: .jupyter/);
## LAB_ARGS="--no-browser --ip=0.0.0.0 --port=8888" passes flags on (a remote or headless machine)
LAB_ARGS ?=
# Jupyter refuses to start as root without being told: the lab tells it (a container's user).
AS_ROOT := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root)
lab: $(LAB_STAMP)
	JUPYTER_CONFIG_DIR="$(JUPYTER_HOME)" JUPYTER_DATA_DIR="$(JUPYTER_HOME)/data" \
	JUPYTERLAB_SETTINGS_DIR="$(JUPYTER_HOME)/lab/user-settings" \
	JUPYTERLAB_WORKSPACES_DIR="$(JUPYTER_HOME)/lab/workspaces" \
	$(BIN)/jupyter lab --ServerApp.root_dir=notebooks $(AS_ROOT) $(LAB_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .

## fields: regenerate the scenario field reference in docs/
fields: $(STAMP)
	$(BIN)/python -m simulator fields > docs/scenario-fields.txt

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis data/results build/compiled
