"""The DAG lever "preload, index only", a measuring device: every check of validation switched
off but the target's unique index, in the benchmark's own Airflow alone (its local settings call
`switch_checks_off`); and the test that tells whether a run's validate tasks ran the checks its
lever says."""
from __future__ import annotations

import sys
from typing import Any


def validate_index_only(url: str, schema: str, table: str, key: str, expected_rows: int, key_min: Any,
                        key_max: Any, engine: str = "postgres", trust_constraints: bool | None = None, *,
                        unique: Any = (), unique_result: dict | None = None, **ignored: Any):
    """`validation.validate_table` with every check switched off but the unique index's: the
    outcome reports what `prove_unique` found (validate_stream built the index before and adds
    its seconds to the outcome), and nothing else runs. The "index only" lever's stand-in."""
    from switchyard.observability.validation import ValidationOutcome, _unique_check
    checks = [_unique_check(list(unique), unique_result)] if unique and unique_result is not None else []
    return ValidationOutcome(success=all(c.success for c in checks), checks=checks, seconds=0.0, import_seconds=0.0,
                             gx_preloaded="great_expectations.expectations" in sys.modules)


def switch_checks_off() -> None:
    """The "index only" DAG lever, a measuring device (SWITCHYARD_BENCH_INDEX_ONLY=1 in the
    benchmark's own Airflow, from its local settings): every validate task of this process and
    of the task processes it forks builds the target's unique index and runs no other check."""
    from switchyard.observability import validation
    validation.validate_table = validate_index_only
    print("switchyard bench: validation checks switched off but the unique index (the 'index only' lever)",
          file=sys.stderr, flush=True)


def checks_ran(result: dict, index_only: bool) -> dict:
    """Whether a DAG run's validate tasks ran the checks the lever says: with `index_only`, each
    reports a cost of `unique` alone; without it, at least one reports another kind of check."""
    validates = [t for t in result.get("tasks") or [] if t["step"] == "validate"]
    kinds = [set(t.get("validation_cost") or {}) for t in validates]
    other = sorted(set().union(*kinds) - {"unique"}) if kinds else []
    only_unique = sum(1 for k in kinds if k == {"unique"})
    reported = sum(1 for t in validates if t.get("validation_cost") is not None)
    if index_only:
        ok = bool(validates) and only_unique == len(validates)
        why = ("" if ok else f"{len(validates) - only_unique} of {len(validates)} validate tasks reported more "
               f"than the unique index or nothing ({', '.join(other) or 'no cost reported'})")
    else:
        ok = not validates or bool(other)
        why = "" if ok else "every validate task reported the unique index alone: the checks were switched off"
    return {"index_only": index_only, "validate_tasks": len(validates), "reported": reported,
            "only_unique": only_unique, "other_kinds": other, "as_intended": ok, "why": why}
