# Switchyard: `make demo` runs the main job end to end, `make test` runs the tests.
# Both set up what they need: a virtualenv from requirements.txt + constraints.txt with the
# project installed in it (editable: `switchyard` and its development tooling), the embedded
# PostgreSQL, generated TPC-H data, a local Airflow.
SCALE ?= 0.1
STREAMS ?= 4
SPEC ?= tpch
# A batch folder under the data root to load (a spec without a generator needs one).
BATCH ?=
# local: LocalExecutor runs every step; edge: the loads run on two local Edge workers
# (queues source_a, source_b, a data root each; docs/deployment.md).
EXECUTOR ?= local
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
PIP := $(VENV)/bin/pip --disable-pip-version-check
# uv (pinned in constraints.txt) installs the same pinned set as pip would, downloading in
# parallel: about 10 seconds on a clean machine against pip's one and a half minutes.
# --compile-bytecode writes each package's .pyc once, at install (about 30 s on 2 cores). Every
# Airflow process imports 1,700 modules (a CLI command) to 3,600 (a task that validates): without them,
# and where Python may not write them itself (PYTHONDONTWRITEBYTECODE set, as on many CI
# machines and containers), each process compiled them again: `airflow version` took 9.6 s
# instead of 4.1 s, and `make test` took a third more CPU time (35 min against 27).
UV := $(VENV)/bin/uv pip install --python $(PY) --compile-bytecode

export GX_ANALYTICS_ENABLED := False

.PHONY: help install demo test unit chaos bench db-uri psql stop status clean lock docs

help:
	@echo "make install                      only the virtualenv: .venv/bin/switchyard, .venv/bin/airflow (demo and test do it first)"
	@echo "make demo [SCALE=0.1 STREAMS=4]   load a generated TPC-H batch through the real DAG"
	@echo "make demo SPEC=shop                the same with the shop example (messy CSV, date keys, NULLs, gzip)"
	@echo "make demo SPEC=my.yaml BATCH=name  your spec, your producer's batch <data root>/<name>"
	@echo "make demo EXECUTOR=edge            the loads on two local Edge workers, one per source (docs/deployment.md)"
	@echo "make test                          run the tests (embedded PostgreSQL, real Airflow; 9 to 13 minutes on 2 cores, as fast or slow as the machine is that day)"
	@echo "make unit                          the unit tests only (no server; a minute or two)"
	@echo "make chaos                         the fault, rerun and backfill cases, the remote workers (docs/reliability-and-security.md)"
	@echo "make bench [SCALE=1 STREAMS=4 LEVERS=1]  throughput against the floor and the peers, server apart and all shared (docs/benchmarks.md)"
	@echo "make db-uri | make psql            the embedded target's URI / a SQL prompt on it"
	@echo "make stop                          stop the local Airflow and the embedded PostgreSQL"
	@echo "make status                        which local services run, and the active and queued runs"
	@echo "make docs                          regenerate docs/configuration.md from the settings"

$(STAMP): requirements.txt constraints.txt pyproject.toml plugins/switchyard_dev/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Switchyard needs Python 3.11 or newer (set PYTHON=python3.11)")'
	@echo "==> installing into $(VENV): the pinned requirements (about 1.5 GB from the package index), then Switchyard itself"
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q -c constraints.txt uv
	$(UV) -r requirements.txt -c constraints.txt
	$(UV) -c constraints.txt -e '.[mssql,edge,lineage,dev]' -e plugins/switchyard_dev
	@touch $(STAMP)
	@echo "==> installed: $(VENV)/bin/switchyard --help"

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/switchyard demo --spec $(SPEC) --scale $(SCALE) $(if $(filter command line environment,$(origin STREAMS)),--streams $(STREAMS),$(if $(BATCH),,--streams $(STREAMS))) --executor $(EXECUTOR) $(if $(BATCH),--batch $(BATCH))

# The whole suite, in one process per core (TEST_WORKERS=1: one process); it stops the
# embedded PostgreSQL afterwards if it was the one to start it. A worker that runs out of tests
# takes queued ones from the others (worksteal): with the default scheduling, one worker could
# end up running its queue of DAG runs alone while the other sat idle.
TEST_WORKERS ?= auto
test: $(STAMP)
	$(PY) -m pytest tests -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

unit: $(STAMP)
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# Faults (killed loads, server restarts, lock waits), concurrent runs, backfills with a real
# scheduler, the loads on Edge workers with one killed (about 3 minutes). The fast ones also run
# in `make test`; the scheduler backfill and the remote workers run only here.
chaos: $(STAMP)
	$(PY) -m pytest tests -m chaos $(PYTEST_ARGS)

# Side-by-side throughput: raw COPY floor, the loader alone, the DAG end to end, peers.
# Its own defaults (scale 1, 4 streams), not the demo's: SCALE / STREAMS count only when
# given on the command line or in the environment (BENCH_SCALE / BENCH_STREAMS also work).
# LEVERS=1 adds the levers; BENCH_ARGS passes anything else (e.g. --repeat 1).
BENCH_SCALE ?= $(if $(filter command line environment,$(origin SCALE)),$(SCALE),1)
BENCH_STREAMS ?= $(if $(filter command line environment,$(origin STREAMS)),$(STREAMS),4)
BENCH_ARGS ?=
bench: $(STAMP)
	$(PY) -m switchyard_dev.bench --scale $(BENCH_SCALE) --streams $(BENCH_STREAMS) $(if $(filter 1 yes true,$(LEVERS)),--levers) $(BENCH_ARGS)

db-uri: $(STAMP)
	@$(VENV)/bin/switchyard db uri

psql: $(STAMP)
	$(VENV)/bin/switchyard db psql

stop:
	-@$(VENV)/bin/switchyard services stop
	-@$(VENV)/bin/switchyard db stop

status:
	-@$(VENV)/bin/switchyard services status

docs: $(STAMP)
	$(VENV)/bin/switchyard config --markdown > docs/configuration.md

# Re-lock the resolved set after changing requirements.txt.
lock: $(STAMP)
	$(PIP) freeze --exclude-editable | sort > constraints.txt

clean: stop
	rm -rf .switchyard
