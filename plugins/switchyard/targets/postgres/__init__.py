"""The PostgreSQL target: its adapter, and its SQL in include/sql/postgres/."""
from switchyard.targets.postgres.adapter import PostgresAdapter

__all__ = ["PostgresAdapter"]
