"""An engine's SQL templates live in its own folder, named by its adapter's `templates`: a built-in
engine's in `targets/<engine>/templates/`, a flavour's inherited from its parent unless it names
its own, an engine from another package's wherever that package keeps them."""
from __future__ import annotations

from pathlib import Path

from switchyard.core.spec import load_spec
from switchyard.targets import adapter_class
from switchyard.targets.postgres.adapter import PostgresAdapter
from switchyard.targets.templates import compile_templates

SPEC = load_spec("tpch")
TARGETS = Path(__file__).resolve().parents[3] / "plugins" / "switchyard" / "targets"


def test_each_built_in_engine_keeps_its_templates_in_its_own_folder():
    for engine in ("postgres", "mssql"):
        cls = adapter_class(engine)
        assert cls.templates == TARGETS / engine / "templates"
        assert (cls.templates / "lease_claim.sql").is_file()


def test_the_preload_compiles_every_built_in_engines_templates():
    built_in = sum(len(list((TARGETS / e / "templates").glob("*.sql"))) for e in ("postgres", "mssql"))
    assert compile_templates() == built_in


def test_a_flavour_inherits_its_parents_templates_or_names_its_own(tmp_path):
    class Inherits(PostgresAdapter):
        engine = "inherits"

    assert Inherits.templates == PostgresAdapter.templates

    (tmp_path / "lease_claim.sql").write_text("-- this engine's own claim\nSELECT 1 FROM {{ q(schema) }}.t;\n")

    class OwnFolder(PostgresAdapter):
        engine = "own_folder"
        templates = tmp_path

    own = OwnFolder(SPEC, uri="postgresql://plan-only", schema="tpch")
    parent = PostgresAdapter(SPEC, uri="postgresql://plan-only", schema="tpch")
    assert own.render("lease_claim.sql") == ["-- this engine's own claim\nSELECT 1 FROM \"tpch\".t"]
    assert parent.render("lease_claim.sql") != own.render("lease_claim.sql")
