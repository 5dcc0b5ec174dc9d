# optalloc developer commands. `make demo` and `make test` set up .venv themselves.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test test-fast bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

## demo: validate the demo scenario and run the main job on it
demo: $(STAMP)
	$(BIN)/optalloc validate scenarios/demo.yaml
	$(BIN)/optalloc ledger report --config scenarios/demo.yaml --demo

## test: the whole suite (slow suites included); see test-fast while working
test: $(STAMP)
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not slurm"

## bench: benchmarks (tables + JSON under bench-results/)
bench: $(STAMP)
	$(BIN)/optalloc bench --out bench-results

clean:
	rm -rf $(VENV) bench-results .pytest_cache .hypothesis
