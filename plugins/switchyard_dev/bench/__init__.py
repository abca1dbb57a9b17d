"""The benchmark (`make bench`, `python -m switchyard_dev.bench`), one module per part. The
imports run one way, from the command down to the shared helpers:

- cli: the command (`__main__` runs it): every part in turn, in each shape;
- report: bench.json, the plots, and the summary printed at the end;
- targets: the project's targets against the figures, and the bounds beside them;
- growth: `--scales`: the floor with the target's unique indexes and the DAG at each scale, and
  the fit of the DAG's seconds over the GB;
- small: a small extract of one table (readings.yaml) through the DAG, a task per step and
  `tasks: single`;
- shapes: where the server runs (laptop, production), and DAG runs with other load pools;
- remote: the DAG's loads on two Edge workers beside LocalExecutor alone;
- dag_levers: the DAG run once per configuration of the levers, in rotating order;
- dag_run: one DAG run through the benchmark's own Airflow, and its analysis;
- levers: the COPY variants, server settings and validation, before Airflow starts;
- constraints, value_guard: one load at a time, what the staging table's constraints cost the
  server and what the loads' value guard costs the client (levers too, not in the default);
- peers: what a user writes with stock Airflow, on a sample;
- loader: the adapter's prepare and load per file, no Airflow;
- floor: raw COPY sessions, and the floor with the target's unique indexes;
- dag_parse: the DAG file's parse time in fresh processes;
- graph: the DAG's graph with steps that do nothing (plot: the pictures);
- index_only: the "index only" lever's stand-in for validation (local_settings/ installs it);
- own_airflow: the benchmark's own Airflow: home, settings, start and stop, CPU;
- common: medians, parallel jobs, schemas, the batch's files, the machine's facts.

Apart: attach (what ATTACH PARTITION does with the parent's indexes) and task_start (what a
task process's start costs), each a `python -m` command of its own.
"""
