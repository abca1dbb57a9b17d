# Switchyard: `make demo` runs the main job end to end, `make test` runs the tests.
# Both set up what they need: a virtualenv from requirements.txt + constraints.txt,
# the embedded PostgreSQL, generated TPC-H data, a local Airflow.
SCALE ?= 0.1
STREAMS ?= 4
SPEC ?= tpch
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

export PYTHONPATH := $(CURDIR)/plugins
export GX_ANALYTICS_ENABLED := False

.PHONY: help demo test chaos bench db-uri psql stop clean lock

help:
	@echo "make demo [SCALE=0.1 STREAMS=4]   load a generated TPC-H batch through the real DAG"
	@echo "make demo SPEC=shop                the same with the shop example (messy CSV, date keys, NULLs, gzip)"
	@echo "make test                          run the tests (embedded PostgreSQL, real Airflow)"
	@echo "make chaos                         the fault, rerun and backfill cases (README: Reliability and security)"
	@echo "make bench [SCALE=1 STREAMS=4 LEVERS=1]  throughput side by side with the floor and the peers (JSON, PNG)"
	@echo "make db-uri | make psql            the embedded target's URI / a SQL prompt on it"
	@echo "make stop                          stop the local Airflow and the embedded PostgreSQL"

$(STAMP): requirements.txt constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Switchyard needs Python 3.11 or newer (set PYTHON=python3.11)")'
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements.txt -c constraints.txt
	@touch $(STAMP)

demo: $(STAMP)
	$(PY) -m switchyard demo --spec $(SPEC) --scale $(SCALE) --streams $(STREAMS)

test: $(STAMP)
	$(PY) -m pytest tests $(PYTEST_ARGS)

# Faults (killed loads, server restarts, lock waits), concurrent runs, backfills with a real
# scheduler. The fast ones also run in `make test`; the scheduler backfill runs only here.
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
	@$(PY) -m switchyard db uri

psql: $(STAMP)
	$(PY) -m switchyard db psql

stop:
	-@$(PY) -m switchyard services stop
	-@$(PY) -m switchyard db stop

# Re-lock the resolved set after changing requirements.txt.
lock: $(STAMP)
	$(VENV)/bin/pip freeze --exclude-editable | sort > constraints.txt

clean: stop
	rm -rf .switchyard
