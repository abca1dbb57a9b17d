"""The layers, enforced: import-linter's contracts (pyproject.toml, [tool.importlinter]) hold.

switchyard never imports switchyard_dev; core imports neither Airflow nor the targets nor
observability; the targets never import Airflow; the layers import downwards only
(cli > airflow > observability > targets > core > settings). See docs/architecture.md.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_hold():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "plugins"), os.environ.get("PYTHONPATH")])))
    result = subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
                               "sys.argv = ['lint-imports', '--no-cache']; lint_imports_command()"],
        cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout, result.stdout[-3000:]
