"""The shop example's producer: an online shop's extract as real systems write it.

Three tables of the built-in `shop` spec (core/specs/shop.yaml), in RFC 4180 CSV with a
header line:

* `customers`: the customer master, keyed by an integer id with gaps, CRLF line ends;
* `orders`: one row per order, keyed by its day (a DATE key), gzip-compressed, `NA` for NULL;
* `events`: the web shop's clickstream, the big table, keyed by day.

The data is messy the way extracts are: text with the delimiter, quotes and line breaks
inside quoted fields, backslashes (Windows paths, regular expressions, JSON, `\\N`), every
script and emoji, combining characters, leading and trailing spaces, empty strings next to
NULLs, "NULL" and "NA" as ordinary text, a value exactly at its column's declared length.
Every field survives a byte-exact load unchanged: the only value a loader may turn into
NULL is the table's NULL marker, and it appears only in nullable columns.

Deterministic from a seed, pure Python, no data files. A customer's row depends on the seed
and its number only, an order's and an event's on the seed and its day, so one seed gives
the same rows whatever the stream count. Streams split the key: customers by contiguous id
ranges, orders and events by contiguous day ranges over the year from FIRST_DAY. The
manifest (rows, bytes, smallest and largest key per file; ISO-8601 dates for a date key) is
the producer's own count of what it wrote, and is written last.

Size: `scale` 1 is about 100,000 customers, 400,000 orders and 1.5 million events; the
demo's default (0.1) is about 200,000 rows and 43 MB, written in about 2 s.
"""
from __future__ import annotations

import gzip
import io
import random
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Callable, Iterator, Sequence

from switchyard.core.batch import MANIFEST, Manifest, ManifestEntry, write_manifest
from switchyard.core.spec import LoadSpec, Table

GENERATOR = "shop"
DEFAULT_SEED = 1
FIRST_DAY = date(2025, 1, 1)
DAYS = 365
ROWS_PER_SCALE = {"customers": 100_000, "orders": 400_000, "events": 1_500_000}
FIRST_ORDER_ID = 5_000_000
FIRST_EVENT_ID = 90_000_000_000
# One row in NASTY_EVERY[table] takes its messy text from the corpora below, in turn, so even
# a small batch holds every case; the other rows are ordinary (and still quoted where needed).
NASTY_EVERY = {"customers": 4, "orders": 4, "events": 8}


class Bare(str):
    """A value written exactly as it is, never quoted: an unquoted empty field or "NA" in a
    NOT NULL column, which a loader must read as the text it is, not as NULL."""


# --- the messy corpora ---------------------------------------------------------------------
# Names as people type them: apostrophes, commas, quotes, every script, combining marks
# (U+0308 after an "e": the decomposed form of "ë"), emoji, stray spaces, "NULL" the surname.
NAMES = [
    "Siobhán O'Brien", "Smith, John", 'Robert "Bobby" Tables', "Zoe\u0308 Martin", "Zoë Martin",
    "山田 太郎", "王小明", "김민준", "محمد الأحمد", "Anna 🌸 Berg", " Jane Doe ", "Null", "NULL",
    "Ng\u0303uyễn Văn An", "José María García-López", "Ærøskøbing Ølsen", "\\N", "N/A",
    "D'Angelo, \"Dee\"", "Åsa\tLind", "Łukasz Żółć", "👩\u200d👩\u200d👧 Family Account", "",
]
FIRST = ["Anna", "Ben", "Chloé", "David", "Emma", "Felix", "Grace", "Hiro", "Ines", "Jonas", "Kai",
         "Lena", "Mateo", "Nora", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tomás", "Uma", "Yuki"]
LAST = ["Meyer", "Dubois", "Smith", "Murphy", "Tanaka", "Li", "Kim", "Silva", "Okafor", "Nguyen",
        "Johansson", "Rossi", "Kowalski", "Haddad", "Patel", "O'Neill", "van der Berg", "Müller"]
COUNTRIES = ["DE", "FR", "GB", "IE", "JP", "CN", "KR", "US", "CA", "BR", "NA", "ZA", "IN", "AE", "SE"]
TIERS = ["bronze", "silver", "gold", "platinum"]
# Free-text notes from a CRM: Windows paths (the first one reads as an escape sequence to a
# loader that treats "\" specially), UNC shares, regexes, JSON, CRLF and LF line breaks, a
# lone "\." line (PostgreSQL's end-of-data marker), trailing backslashes, tabs.
NOTES = [
    "C:\\new\\table\\N",
    "\\\\fileserver\\share\\invoices\\2025\\",
    "Scanned ID stored in D:\\scans\\2025\\ID_4711.pdf, see ticket #12",
    "phone must match ^\\+?\\d{2,3}[- ]\\d{4,}$",
    '{"vip": true, "path": "C:\\\\Users\\\\zoë\\\\orders.json", "tags": ["a,b", "c\\"d"]}',
    "Called twice.\r\nPrefers email.\r\nDo NOT call after 6pm, \"really\".",
    "line one\nline two (LF only, pasted from a Mac)",
    "first line\r\n\\.\r\nlast line",
    "ends with a backslash \\",
    "\\N",
    "\\t is not a tab here; this is one:\t<-",
    "\\\\",
    "NULL",
    "   ",
    "Payment ref: 2025/03/INV-0042; amount: 1,234.50 EUR",
    "Customer wrote: “Où est ma commande?” — 配送はいつですか？ 🙏",
    "zero width\u200bspace and line\u2028separator",
    '"',
    '""',
    ",",
]
STATUSES = ["placed", "paid", "shipped", "delivered", "cancelled", "returned"]
CURRENCIES = ["EUR", "USD", "GBP", "JPY", "SEK", "BRL", "CAD"]
# Coupon codes: "" is a coupon field submitted empty (not NULL: the marker here is NA); the
# 40-character CJK code sits exactly at varchar(40) / nvarchar(40) (one UTF-16 unit each);
# "NA", the NULL marker's text, is quoted: a quoted field is a value, so it is the text NA.
COUPONS = ["", "NA", "SPRING25", " summer-10 ", "N/A", "na", "NULL", "\\N", "WELCOME\\5",
           "優惠券" * 13 + "券", "BLACK,FRIDAY", 'SAVE"20"', "ÉTÉ-2025"]
ADDRESSES = [
    "12 Main St\nApt 4, Springfield, IL 62701",
    "〒150-0002\n東京都渋谷区渋谷2-21-1",
    "Flat 3, \"The Old Mill\"\r\nMill Lane\r\nYork YO1 7HP",
    "Unter den Linden 77, 10117 Berlin",
    "C/ Gran Vía, 28 — 3º izq.\n28013 Madrid",
    "서울특별시 중구 세종대로 110",
    "P.O. Box 42\\7, Windhoek",
    " 5 Rue de Rivoli , 75001 Paris ",
]
GIFT_MESSAGES = [
    "Happy birthday! 🎉🎂",
    "Love,\r\nMum",
    "To the best \"dad\" ever,\nfrom all of us",
    "C:\\ is full again :) — here is a bigger disk",
    "\\N",
    "お誕生日おめでとう",
    "Merry Xmas, Prosit Neujahr, Feliz Navidad",
    "",
    "trailing backslash \\",
    "👨\u200d👩\u200d👧\u200d👦",
]
PRODUCTS = [("tea-bowl", "TEA-42"), ("茶碗", "CHA-7"), ("café-au-lait-bowl", "CAF-3"),
            ("cast-iron-kettle", "KET-12"), ("spoon,-silver", "SPN-1"), ("matcha-whisk", "MAT-9")]
SEARCHES = [
    "café", "cafe\u0301", "茶碗", "🍵 tea", "\\d+ regex", "C:\\new\\table\\N", "\\N", '50" TV',
    "red, blue", "ends with \\", "  leading spaces", "trailing spaces  ", "NULL", "NA",
    "a\tb", "'; DROP TABLE events; --", "kettle\nsecond line", "ミルク, 砂糖", "ǅemal",
]
PROPERTIES = [
    '{"sku":"TEA-42","qty":2,"price":12.5}',
    '{"path":"C:\\\\Users\\\\zoë\\\\cart.json","note":"say \\"hi\\""}',
    '{"emoji":"🎉","cjk":"茶","regex":"^\\\\d+$","nul":"\\\\N"}',
    '{\n  "sku": "KET-12",\n  "gift": true,\n  "message": "Love,\\r\\nMum"\n}',
    '{"coupon":null,"items":["a,b","c"]}',
    "{}",
]
USER_AGENTS = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/18.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "curl/8.5.0",
    'Mozilla/5.0 (compatible; "QuoteBot"/1.0; +https://bots.example.net/?a=1,b=2)',
    "Python-urllib/3.11",
]
EVENT_TYPES = (["page_view"] * 30 + ["search"] * 6 + ["add_to_cart"] * 6 + ["remove_from_cart"] * 2
               + ["checkout"] * 3 + ["purchase"] * 3)
# Monday..Sunday: more orders at the weekend.
WEEKDAY_WEIGHT = (0.9, 0.85, 0.9, 0.95, 1.05, 1.2, 1.15)


# --- the shape of a batch -------------------------------------------------------------------
def _weight(day: int, table: str, seed: int) -> float:
    d = FIRST_DAY + timedelta(days=day)
    w = WEEKDAY_WEIGHT[d.weekday()] * (1 + 0.5 * day / DAYS)
    if (d.month == 11 and d.day >= 24) or (d.month == 12 and d.day <= 20):
        w *= 1.8  # Black Friday to Christmas
    return w * random.Random(f"{seed}:{table}:volume:{day}").uniform(0.85, 1.15)


def day_counts(table: str, scale: float, seed: int = DEFAULT_SEED) -> list[int]:
    """Rows of a date-keyed table on each day of the year (at least one a day)."""
    weights = [_weight(d, table, seed) for d in range(DAYS)]
    total = ROWS_PER_SCALE[table] * scale
    norm = total / sum(weights)
    return [max(1, round(w * norm)) for w in weights]


def customer_count(scale: float, streams: int) -> int:
    return max(streams, round(ROWS_PER_SCALE["customers"] * scale))


def customer_id(n: int) -> int:
    """The id of customer number n (0-based): increasing, with gaps (closed accounts)."""
    return 1000 + 3 * n + (n * 2654435761 >> 11) % 3


def split(count: int, streams: int, k: int) -> range:
    """Stream k's share (1-based) of `count` consecutive items: contiguous, nearly equal."""
    return range((k - 1) * count // streams, k * count // streams)


def day_of(index: int) -> date:
    return FIRST_DAY + timedelta(days=index)


# --- the rows --------------------------------------------------------------------------------
def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _money(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"


def customer_rows(numbers: range, seed: int) -> Iterator[list]:
    every = NASTY_EVERY["customers"]
    for n in numbers:
        rng = random.Random(f"{seed}:customers:{n}")
        nasty = n % every == 0
        turn = n // every
        first, last = rng.choice(FIRST), rng.choice(LAST)
        name = NAMES[turn % len(NAMES)] if nasty else f"{first} {last}"
        if name == "" and n % 3:
            name = Bare("")  # no name given, unquoted: still an empty string (NOT NULL column)
        email = None if rng.random() < 0.1 else f"{first}.{last}{n}@example.com".lower().replace("'", "")
        if nasty and turn % 5 == 0:
            email = f'"{first} {last}"@example.com'  # a quoted local part: quotes inside the field
        elif nasty and turn % 5 == 2:
            email = ""  # written "": an empty string, where an unquoted empty field is NULL
        country = rng.choice(COUNTRIES) if not nasty else COUNTRIES[turn % len(COUNTRIES)]
        if country == "NA" and n % 2:
            country = Bare("NA")  # Namibia, unquoted: NULL marker text in a NOT NULL column
        signup = date(2015, 1, 1) + timedelta(days=rng.randrange(4018))
        tier = None if rng.random() < 0.3 else rng.choice(TIERS)
        if nasty:
            notes = NOTES[turn % len(NOTES)]
        else:
            notes = None if rng.random() < 0.6 else rng.choice(
                ["VIP", "prefers invoice", "moved, new address pending", "asked for a call back"])
        yield [customer_id(n), email, name, country, signup.isoformat(), tier, notes]


def order_rows(day: int, first_seq: int, count: int, customers: int, seed: int) -> Iterator[list]:
    rng = random.Random(f"{seed}:orders:{day}")
    iso = day_of(day).isoformat()
    every = NASTY_EVERY["orders"]
    for j in range(count):
        seq = first_seq + j
        nasty = seq % every == 0
        turn = seq // every
        status = rng.choice(STATUSES)
        cents = rng.randrange(0, 50_000) if rng.random() < 0.97 else rng.randrange(50_000, 9_999_999)
        country = rng.choice(COUNTRIES)
        if nasty:
            country = COUNTRIES[turn % len(COUNTRIES)]
        if country == "NA" and seq % 2:
            country = Bare("NA")  # Namibia, unquoted, in a table whose NULL marker is NA
        coupon = COUPONS[turn % len(COUPONS)] if nasty else (None if rng.random() < 0.8 else "SPRING25")
        if coupon == "" and seq % 3 == 0:
            coupon = Bare("")  # unquoted empty field: an empty string, since NULL is NA here
        digital = rng.random() < 0.1
        address = None if digital else (ADDRESSES[turn % len(ADDRESSES)] if nasty
                                        else f"{rng.randrange(1, 200)} {rng.choice(LAST)} Street")
        gift = GIFT_MESSAGES[turn % len(GIFT_MESSAGES)] if nasty else None
        yield [FIRST_ORDER_ID + seq, iso, customer_id(rng.randrange(customers)), status, _money(cents),
               rng.choice(CURRENCIES), country, coupon, address, gift]


def event_rows(day: int, first_seq: int, count: int, customers: int, seed: int) -> Iterator[list]:
    rng = random.Random(f"{seed}:events:{day}")
    iso = day_of(day).isoformat()
    millis = sorted(rng.randrange(86_400_000) for _ in range(count))
    sessions = [(_uuid(rng), None if rng.random() < 0.4 else customer_id(rng.randrange(customers)),
                 rng.choice(USER_AGENTS) if rng.random() > 0.02 else None)
                for _ in range(max(1, count // 6))]
    every = NASTY_EVERY["events"]
    for j in range(count):
        seq = first_seq + j
        nasty = seq % every == 0
        turn = seq // every
        ms = millis[j]
        at = f"{iso} {ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"
        session, customer, agent = rng.choice(sessions)
        kind = "search" if nasty else rng.choice(EVENT_TYPES)
        slug, sku = rng.choice(PRODUCTS)
        query = None
        properties = None
        if kind == "search":
            query = SEARCHES[turn % len(SEARCHES)] if nasty else rng.choice(["tea", "kettle", "bowl", "matcha"])
            url = (f"https://shop.example.com/search?q={query}&sort=price,asc" if nasty and turn % 2
                   else f"https://shop.example.com/search?q={query.replace(' ', '+')}")
        else:
            url = f"https://shop.example.com/p/{slug}?sku={sku}&ref=home,banner"
            if kind in ("add_to_cart", "remove_from_cart", "checkout", "purchase"):
                properties = rng.choice(PROPERTIES)
        if nasty and turn % 3 == 1:
            properties = PROPERTIES[turn % len(PROPERTIES)]
        referrer = None if rng.random() < 0.3 else rng.choice([
            "https://www.google.com/search?q=tea+bowl,+handmade",
            "https://shop.example.com/",
            "https://www.bing.com/search?q=%E8%8C%B6%E7%A2%97",
            "android-app://com.google.android.gm/"])
        yield [FIRST_EVENT_ID + seq, iso, at, session, customer, kind, url, referrer, agent, query, properties]


# --- writing -------------------------------------------------------------------------------
@dataclass
class Written:
    path: Path
    rows: int = 0
    key_min: object = None
    key_max: object = None


class CsvWriter:
    """RFC 4180 CSV as the table's format says: quotes only where needed (or everywhere when
    asked), the NULL marker unquoted for None, the table's line end after every record."""

    def __init__(self, fh: io.TextIOBase, table: Table):
        fmt = table.format
        self.fh = fh
        self.delimiter = fmt.delimiter
        self.eol = "\r\n" if fmt.line_end == "crlf" else "\n"
        self.marker = fmt.null_marker
        self.quoting = fmt.quoting
        self.nullable = [c.nullable for c in table.columns]
        self.names = table.column_names

    def header(self) -> None:
        self.fh.write(self.delimiter.join(self.names) + self.eol)

    def field(self, value, i: int, quote_all: bool) -> str:
        if value is None:
            if not self.nullable[i] or self.marker is None:
                raise ValueError(f"column {self.names[i]} is NOT NULL (or the table has no NULL marker)")
            return self.marker
        if isinstance(value, int):
            return str(value)
        if isinstance(value, Bare):
            return str(value)
        if self.nullable[i] and value == self.marker and self.quoting != "csv":
            # Unquoted, the marker's text in a nullable column reads back as NULL.
            raise ValueError(f"column {self.names[i]}: the value {value!r} is the NULL marker")
        if (quote_all or value == "" or '"' in value or self.delimiter in value or "\n" in value
                or "\r" in value or value == self.marker):
            return '"' + value.replace('"', '""') + '"'
        return value

    def row(self, values: Sequence, quote_all: bool = False) -> None:
        self.fh.write(self.delimiter.join(self.field(v, i, quote_all) for i, v in enumerate(values)) + self.eol)


@contextmanager
def _open(path: Path) -> Iterator[io.TextIOWrapper]:
    with path.open("wb") as raw:
        if path.name.endswith(".gz"):
            # No name and no time in the gzip header: the same rows give the same bytes.
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as packed, \
                    io.TextIOWrapper(packed, encoding="utf-8", newline="") as fh:
                yield fh
        else:
            with io.TextIOWrapper(raw, encoding="utf-8", newline="") as fh:
                yield fh


def write_stream(path: Path, table: Table, rows: Iterator[list], key_of: Callable[[object], object],
                 quote_all_every: int = 0) -> Written:
    path.parent.mkdir(parents=True, exist_ok=True)
    out = Written(path)
    key_index = table.column_names.index(table.key)
    with _open(path) as fh:
        writer = CsvWriter(fh, table)
        writer.header()
        for values in rows:
            # Some exporters quote every text field; a few of this file's rows are written so.
            quote_all = bool(quote_all_every) and out.rows % quote_all_every == quote_all_every - 1
            writer.row(values, quote_all)
            key = key_of(values[key_index])
            if out.key_min is None:
                out.key_min = key
            out.key_max = key
            out.rows += 1
    return out


def _remove_old_streams(batch_dir: Path, spec: LoadSpec) -> None:
    """Stream files a previous generation left (another stream count): not part of this batch."""
    for table in spec.tables:
        for old in batch_dir.glob(table.files.format(table=table.name, stream="*")):
            if old.is_file():
                old.unlink()


def generate_shop(batch_dir: Path, spec: LoadSpec, scale: float, streams: int,
                  tables: list[str] | None = None, seed: int = DEFAULT_SEED) -> Manifest:
    """Write a shop batch of `streams` streams at `scale` into `batch_dir`, manifest last."""
    if streams < 1:
        raise ValueError("streams must be at least 1")
    if streams > DAYS:
        raise ValueError(f"the shop example's date-keyed tables cover {DAYS} days: at most {DAYS} streams")
    if scale <= 0:
        raise ValueError("scale must be positive")
    wanted = [t for t in spec.tables if not tables or t.name in tables]
    batch_dir.mkdir(parents=True, exist_ok=True)
    (batch_dir / MANIFEST).unlink(missing_ok=True)  # the batch is incomplete from here on
    _remove_old_streams(batch_dir, spec)
    customers = customer_count(scale, streams)
    entries = []
    for table in wanted:
        for k in range(1, streams + 1):
            rel = spec.file_for(table.name, k)
            path = batch_dir / rel
            if table.name == "customers":
                written = write_stream(path, table, customer_rows(split(customers, streams, k), seed), int)
            elif table.name in ("orders", "events"):
                counts = day_counts(table.name, scale, seed)
                rows_of = order_rows if table.name == "orders" else event_rows
                days = split(DAYS, streams, k)
                first = sum(counts[:days.start])

                def rows(days=days, first=first, counts=counts, rows_of=rows_of):
                    seq = first
                    for d in days:
                        yield from rows_of(d, seq, counts[d], customers, seed)
                        seq += counts[d]
                written = write_stream(path, table, rows(), date.fromisoformat, quote_all_every=7 if table.name == "orders" else 0)
            else:
                raise ValueError(f"the shop generator does not know table {table.name!r}")
            entries.append(ManifestEntry(table=table.name, stream=k, file=rel, bytes=path.stat().st_size,
                                         rows=written.rows, key_min=written.key_min, key_max=written.key_max))
    manifest = Manifest(spec=spec.name, streams=streams, entries=tuple(entries), scale=scale,
                        path=str(batch_dir / MANIFEST))
    write_manifest(batch_dir, manifest)
    return manifest
