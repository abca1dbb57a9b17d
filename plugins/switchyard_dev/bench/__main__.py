"""`python -m switchyard_dev.bench`: the benchmark's command (cli.py)."""
import sys

from switchyard_dev.bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
