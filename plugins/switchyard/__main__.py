"""`python -m switchyard`: the same command as `switchyard` (see cli.py)."""
import sys

from switchyard.cli import main

if __name__ == "__main__":
    sys.exit(main())
