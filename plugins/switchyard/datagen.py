"""The demo's producer: a TPC-H batch from tpchgen-cli, and its manifest.

The manifest is written by counting the generated files (lines, bytes, first and last
key), independently of the loader, and last, so an interrupted generation never looks
like a complete batch.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from .batch import MANIFEST, Manifest, manifest_for, write_manifest
from .spec import LoadSpec


def tpchgen_binary() -> str:
    beside_python = Path(sys.executable).with_name("tpchgen-cli")
    found = str(beside_python) if beside_python.exists() else shutil.which("tpchgen-cli")
    if not found:
        raise RuntimeError("tpchgen-cli is not installed (pip install tpchgen-cli)")
    return found


def generate_tpch(batch_dir: Path, spec: LoadSpec, scale: float, streams: int,
                  tables: list[str] | None = None) -> Manifest:
    """Generate (or reuse) a TPC-H batch of `streams` streams at `scale`."""
    batch_dir.mkdir(parents=True, exist_ok=True)
    if (batch_dir / MANIFEST).exists():
        from .batch import read_manifest
        existing = read_manifest(batch_dir, spec)
        if existing.streams == streams and existing.scale == scale:
            return existing
    (batch_dir / MANIFEST).unlink(missing_ok=True)
    cmd = [tpchgen_binary(), "--scale-factor", repr(scale), "--output-dir", str(batch_dir),
           "--parts", str(streams), "--overwrite"]
    for t in tables or []:
        cmd += ["--tables", t]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    manifest = manifest_for(batch_dir, spec, streams, tables=tables, scale=scale)
    write_manifest(batch_dir, manifest)
    return manifest
