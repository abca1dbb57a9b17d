"""The PostgreSQL target: its adapter, and its SQL in targets/postgres/templates/."""
from switchyard.targets.postgres.adapter import PostgresAdapter

__all__ = ["PostgresAdapter"]
