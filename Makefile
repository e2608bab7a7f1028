# Two commands set up everything: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEPS := pyproject.toml constraints.txt

.PHONY: test demo lint typecheck infra-lint unit scripts spark35 bench bench-deps clean

$(STAMP): $(DEPS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip==25.3
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,spark,celery,dramatiq]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check sqsdelay tests scripts
	$(BIN)/ruff format --check sqsdelay tests scripts
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy --strict sqsdelay

# CloudFormation and Dockerfile linters live in their own venv (checkov pins its own boto3).
INFRA := .venv-infra
INFRA_STAMP := $(INFRA)/.installed

$(INFRA_STAMP): requirements-infra.txt
	test -x $(INFRA)/bin/python || $(PYTHON) -m venv $(INFRA)
	$(INFRA)/bin/python -m pip install --quiet -r requirements-infra.txt
	touch $(INFRA_STAMP)

infra-lint: $(INFRA_STAMP)
	$(INFRA)/bin/cfn-lint infra/*.yaml
	$(INFRA)/bin/checkov -d infra --framework cloudformation --compact --quiet --skip-download
	$(INFRA)/bin/hadolint Dockerfile

# Two pytest workers, one test file each at a time (its fixtures stay together): most tests
# wait on servers and subprocesses, so this halves the run on two cores.
unit: $(STAMP)
	$(BIN)/pytest -q -n 2 --dist loadfile --durations=15 -m 'not emr_env' --ignore=tests/scripts

# Every script under scripts/ with tiny parameters, in a pytest of its own: the benchmarks
# mostly wait out compressed cycles, so they run beside the main suite, not in its workers.
scripts: $(STAMP) $(FAUXQS_STAMP)
	$(BIN)/pytest -q -n 2 --durations=10 tests/scripts

# The cost job on the Spark that infra/cost-report.yaml's EMR release runs (3.5.5, whose
# pyspark needs numpy < 2, and so a pyarrow built for it): the same constraints, four pins
# changed.
SPARK35 := .venv-spark35
SPARK35_STAMP := $(SPARK35)/.installed
$(SPARK35_STAMP): $(DEPS)
	test -x $(SPARK35)/bin/python || $(PYTHON) -m venv $(SPARK35)
	$(SPARK35)/bin/python -m pip install --quiet --upgrade pip==25.3
	sed -e 's/^pyspark==.*/pyspark==3.5.5/' -e 's/^py4j==.*/py4j==0.10.9.7/' \
	    -e 's/^numpy==.*/numpy==1.26.4/' -e 's/^pyarrow==.*/pyarrow==21.0.0/' \
	    constraints.txt > $(SPARK35)/constraints.txt
	$(SPARK35)/bin/python -m pip install --quiet -c $(SPARK35)/constraints.txt -e '.[spark,emulator]' \
	    pytest pytest-timeout pytest-xdist hypothesis duckdb
	touch $(SPARK35_STAMP)

spark35: $(SPARK35_STAMP)
	$(SPARK35)/bin/pytest -q -n 2 --dist loadfile -p no:cacheprovider -W ignore::DeprecationWarning \
	    tests/cost/test_bill.py tests/cost/test_emr_template.py tests/cost/test_cost_parity.py \
	    tests/cost/test_cost_report.py::test_exact_totals_on_a_hand_built_event_log \
	    tests/cost/test_cost_report.py::test_csv_and_parquet_give_the_same_totals \
	    tests/cost/test_cost_report.py::test_subscription_envelopes_and_firehose_objects_give_the_same_totals \
	    tests/cost/test_cost_report.py::test_report_files_and_summary \
	    tests/cost/test_fold.py tests/cost/test_emr_venv.py

# The venv and fauxqs are built side by side, then the linters; then the main suite, the
# scripts' smoke runs and the infra linters (their own venv, about a minute) start, and the
# Spark 3.5 environment is built and its tests run when the linters end. Most of it waits
# on servers, subprocesses and compressed cycles; each target's output is printed when it
# ends.
test:
	$(MAKE) -j2 --output-sync=target $(STAMP) $(FAUXQS_STAMP)
	$(MAKE) lint typecheck
	$(MAKE) -j3 --output-sync=target infra-lint scripts unit spark35

demo: $(STAMP)
	$(BIN)/sqsdelay demo

clean:
	rm -rf $(VENV) $(INFRA) $(SPARK35) .pytest_cache .mypy_cache .ruff_cache

# The second emulator of the benchmarks comes from npm (its lock file pins it and its node);
# `make test` installs it too, for the scripts' smoke runs (tests/scripts).
FAUXQS_STAMP := scripts/fauxqs/node_modules/.installed
$(FAUXQS_STAMP): scripts/fauxqs/package-lock.json
	cd scripts/fauxqs && npm ci --no-audit --no-fund --silent
	touch $(FAUXQS_STAMP)

bench-deps: $(FAUXQS_STAMP)

bench: $(STAMP)
	cd scripts && ../$(BIN)/python bench_sender.py
	cd scripts && ../$(BIN)/python bench_worker.py
