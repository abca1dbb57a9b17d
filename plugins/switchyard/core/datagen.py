"""The demo's producers: a batch of the spec's generator (`generator:` in the spec), with its manifest.

`tpch`: a TPC-H batch from tpchgen-cli; the manifest is written by counting the generated
files (lines, bytes, first and last key), independently of the loader. `shop`: the shop
example's messy CSV extract (switchyard/core/shop.py), whose producer counts as it writes.
Either way the manifest is written last, so an interrupted generation never looks like a
complete batch.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from switchyard.core.batch import MANIFEST, Manifest, manifest_for, write_manifest
from switchyard.core.spec import LoadSpec


GENERATORS = ("tpch", "shop")


def generate(batch_dir: Path, spec: LoadSpec, scale: float, streams: int, tables: list[str] | None = None,
             seed: int | None = None) -> Manifest:
    """A batch of `streams` streams at `scale` from the generator the spec names."""
    if spec.generator == "tpch":
        if seed is not None:
            raise ValueError("TPC-H data has no seed: tpchgen-cli always writes the same rows for a scale")
        return generate_tpch(batch_dir, spec, scale, streams, tables)
    if spec.generator == "shop":
        from switchyard.core.shop import DEFAULT_SEED, generate_shop
        return generate_shop(batch_dir, spec, scale, streams, tables, seed=DEFAULT_SEED if seed is None else seed)
    raise ValueError(f"{spec.source}: spec {spec.name!r} names the generator {spec.generator!r}; the built-in "
                     f"generators are {', '.join(GENERATORS)} (a spec for your own files needs none)")


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
        from switchyard.core.batch import read_manifest
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


def generate_tpch_day(batch_dir: Path, spec: LoadSpec, scale: float, parts: int, first_part: int,
                      streams: int) -> Manifest:
    """A nightly batch: `streams` consecutive parts of a table split into `parts`, one part per
    stream (day d of a 3-day split into 9 parts holds parts 3d-2..3d), so successive days hold
    successive key ranges. nation and region come only with part 1; a day without them lists
    them as empty streams, which the run skips."""
    import tempfile
    if first_part < 1 or first_part + streams - 1 > parts:
        raise ValueError(f"parts {first_part}..{first_part + streams - 1} are not within 1..{parts}")
    batch_dir.mkdir(parents=True, exist_ok=True)
    (batch_dir / MANIFEST).unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(dir=batch_dir) as scratch:
        for k in range(streams):
            part = first_part + k
            out = Path(scratch) / str(part)
            subprocess.run([tpchgen_binary(), "--scale-factor", repr(scale), "--output-dir", str(out),
                            "--parts", str(parts), "--part", str(part), "--overwrite"],
                           check=True, stdout=subprocess.DEVNULL)
            for table in spec.tables:
                produced = out / table.name / f"{table.name}.{part}.tbl"
                if not produced.exists():
                    continue
                target = batch_dir / spec.file_for(table.name, k + 1)
                target.parent.mkdir(parents=True, exist_ok=True)
                produced.replace(target)
    for table in spec.tables:  # absent tables become empty files: empty streams
        for k in range(1, (streams if table.partitioned else 1) + 1):
            target = batch_dir / spec.file_for(table.name, k)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.touch()
    manifest = manifest_for(batch_dir, spec, streams, scale=scale)
    write_manifest(batch_dir, manifest)
    return manifest


def generate_tpch_shaped(batch_dir: Path, spec: LoadSpec, scale: float, table_streams: dict[str, int],
                         default: int = 1) -> Manifest:
    """A batch whose shape differs per table: `table_streams` gives a table's stream count
    (e.g. lineitem and orders 4), every other table comes in `default` streams (1); the
    manifest lists each table's streams, and its `streams` is the largest."""
    batch_dir.mkdir(parents=True, exist_ok=True)
    (batch_dir / MANIFEST).unlink(missing_ok=True)
    counts = {t.name: (table_streams.get(t.name, default) if t.partitioned else 1) for t in spec.tables}
    for n in sorted(set(counts.values())):
        cmd = [tpchgen_binary(), "--scale-factor", repr(scale), "--output-dir", str(batch_dir),
               "--parts", str(n), "--overwrite"]
        for table, count in counts.items():
            if count == n:
                cmd += ["--tables", table]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    manifest = manifest_for(batch_dir, spec, default, scale=scale, table_streams=counts)
    write_manifest(batch_dir, manifest)
    return manifest
