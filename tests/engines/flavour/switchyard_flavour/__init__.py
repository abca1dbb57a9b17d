"""A third target engine, installed the way a package of its own would install one: PostgreSQL
under a name of its own (a flavour: it speaks PostgreSQL's SQL and reads the spec's PostgreSQL
types), registered by the entry point in ../switchyard_flavour-0.1.dist-info/entry_points.txt.

The tests put this folder on the path: the contract suite runs every case on it, and a DAG
loads a batch through a connection of its type (`flavour://...`). Nothing in Switchyard names it.
"""
from switchyard.targets.postgres import PostgresAdapter


class FlavourAdapter(PostgresAdapter):
    engine = "flavour"
