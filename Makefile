# optalloc developer commands. `make demo` and `make test` set up .venv themselves.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv lock demo test test-fast test-explore bench bench-scale bench-sim clean

$(STAMP): pyproject.toml requirements.lock
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -r requirements.lock
	$(BIN)/pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

venv: $(STAMP)

## lock: re-resolve pyproject.toml's dependency ranges (extras test + cluster) in a fresh venv and
## pin the result in requirements.lock; commit it with the reason for the refresh
lock:
	rm -rf .lock-venv && $(PY) -m venv .lock-venv
	.lock-venv/bin/pip install -q --upgrade setuptools wheel '.[test,cluster]'
	{ sed -n '1,2p' requirements.lock; .lock-venv/bin/pip freeze --all --exclude-editable | grep -v -E '^(optalloc|pip)=='; } > requirements.lock.new
	mv requirements.lock.new requirements.lock && rm -rf .lock-venv

DEMO_OUT ?= out/demo
DEMO_START ?= 2026-11-29T12:00:00Z
DEMO_NOW ?= 2026-11-29T13:00:00Z

## demo: validate the demo scenario, run two scheduling epochs an hour apart on it (no-op runner:
## nothing is started for real; jobs finish by their expected duration), explain a pending job,
## print the ledger report, and write the dashboard (a static site) and the Prometheus metrics
demo: $(STAMP)
	@rm -rf $(DEMO_OUT) && mkdir -p $(DEMO_OUT)
	$(BIN)/optalloc validate scenarios/demo.yaml
	$(BIN)/optalloc epoch --config scenarios/demo.yaml --state $(DEMO_OUT)/state.db \
	    --now $(DEMO_START) --out $(DEMO_OUT)/plan-1.json
	$(BIN)/optalloc epoch --config scenarios/demo.yaml --state $(DEMO_OUT)/state.db \
	    --now $(DEMO_NOW) --out $(DEMO_OUT)/plan.json \
	    --dashboard $(DEMO_OUT)/dashboard --metrics-file $(DEMO_OUT)/optalloc.prom
	$(BIN)/optalloc explain $$($(BIN)/python -c "import json;print(json.load(open('$(DEMO_OUT)/plan.json'))['pending'][0]['job_id'])") \
	    --config scenarios/demo.yaml --state $(DEMO_OUT)/state.db
	$(BIN)/optalloc ledger report --config scenarios/demo.yaml --state $(DEMO_OUT)/state.db --now $(DEMO_NOW)
	COLUMNS=$${COLUMNS:-$$(tput cols 2>/dev/null || echo 120)} \
	    $(BIN)/optalloc jobs --state $(DEMO_OUT)/state.db --config scenarios/demo.yaml | head -n 12
	@echo
	@echo "dashboard: open file://$(abspath $(DEMO_OUT))/dashboard/index.html in a browser"
	@echo "           or serve it live: $(BIN)/optalloc serve --config scenarios/demo.yaml --state $(DEMO_OUT)/state.db"
	@echo "metrics:   $(DEMO_OUT)/optalloc.prom (Prometheus text format; serve answers /metrics)"

## test: the whole suite (slow suites included); see test-fast while working
test: $(STAMP)
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not slurm"

## test-explore: the property tests on fresh random examples (the default seed is fixed)
test-explore: $(STAMP)
	HYPOTHESIS_PROFILE=explore $(BIN)/python -m pytest -q -m "not slow and not slurm" \
	    $$(grep -l "@given" tests/test_*.py)

## bench: ledger and scaling benchmarks, S, M and L (tables + JSON under bench-results/, about
## 10 minutes: the naive PuLP + CBC row takes most of it on M)
bench: $(STAMP)
	$(BIN)/optalloc bench --out bench-results

## bench-scale: every size S..XXL (epoch, LP relaxation, HiGHS alone; naive PuLP + CBC on S, M,
## L and XL, killed past 5 GB or 10 minutes), each instance exported as MPS (about 40 minutes;
## XXL takes ~2 GB)
bench-scale: $(STAMP)
	nice -n 10 $(BIN)/optalloc bench --sizes S,M,L,XL,XXL --naive-sizes S,M,L,XL --repeat 3 \
	    --export --out bench-results

## bench-sim: ITP cluster04 (60 days, 480 GPUs) through greedy and ilp (about 10 minutes)
bench-sim: $(STAMP)
	$(BIN)/optalloc bench --suite sim --out bench-results

clean:
	rm -rf $(VENV) bench-results .pytest_cache .hypothesis
