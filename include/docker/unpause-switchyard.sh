#!/usr/bin/env bash
# One-shot: wait until the dag-processor has stored the DAG, then unpause it, so that a
# trigger (`airflow dags trigger`, or the UI) runs at once instead of queueing.
set -euo pipefail
dag="${SWITCHYARD_DAG_ID:-switchyard_tpch}"
attempts="${SWITCHYARD_UNPAUSE_ATTEMPTS:-60}"
command -v airflow >/dev/null || { echo "airflow is not on PATH" >&2; exit 1; }
for attempt in $(seq 1 "$attempts"); do
  if airflow dags details "$dag" -o json >/dev/null 2>&1; then
    airflow dags unpause -y "$dag"
    echo "DAG $dag is unpaused; trigger it with:"
    echo "  docker compose exec airflow-apiserver airflow dags trigger $dag -c '{\"batch\": \"${SWITCHYARD_DEMO_BATCH:-demo}\"}'"
    exit 0
  fi
  echo "waiting for the dag-processor to parse $dag ($attempt/$attempts)"
  sleep 5
done
echo "DAG $dag did not appear; see \`docker compose logs airflow-dag-processor\`" >&2
exit 1
