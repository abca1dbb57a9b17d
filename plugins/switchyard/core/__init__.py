"""The plain-Python core: the spec, the batch and its files, the plan. It knows neither Airflow nor
the targets."""
import csv

# Every CSV reader of the package (the batch's checks and counts, the loads' value guard, an error's
# record) takes a field as long as PostgreSQL does (1 GB): Python's csv module refuses one over
# 128 KB by default, which a JSON document in a quoted field passes.
csv.field_size_limit(1 << 30)
