"""The development tooling: the local stack (embedded PostgreSQL, a local Airflow), the demo,
the benchmark and the tests' helpers. Never imported by the product."""


class LocalStackError(RuntimeError):
    """What stops the local stack for a reason its user can act on (a port taken, a server that
    did not start or answer): the `switchyard` commands say it in a line, without a traceback."""
