"""The SQL Server load's retry decisions: the scheduler guard and which failures are permanent.

No SQL Server can run on this machine (no container engine, no image), so the load's
connections here come from a scripted connection factory: each scripted session answers
the load batch the way SQL Server does (pyodbc's own exception classes, carrying the
message format the ODBC driver produces: `[SQLSTATE] [Microsoft][ODBC Driver 18 for SQL
Server][SQL Server]<text> (<native error>) (SQLExecDirectW)`). Everything else is the
adapter's real code: the T-SQL it sends, the reconnect loop, the error classification. The
same path against a real server is in tests/contract/test_mssql_contract.py
(test_scheduler_guard_reconnects_then_loads_shared), which holds every scheduler's claim
from a second session.
"""
from __future__ import annotations

import pytest

# pyodbc's module loads unixODBC's libodbc.so.2 (Debian: apt-get install unixodbc); the
# scripted sessions raise pyodbc's own exception classes, so without it there is nothing to run.
pyodbc = pytest.importorskip("pyodbc", exc_type=ImportError,
                             reason="pyodbc cannot load without unixODBC's libodbc.so.2: apt-get install unixodbc")

from switchyard.core.planner import plan_tpch
from switchyard.core.spec import load_spec
from switchyard.targets import TargetError
from switchyard.targets.mssql import (SCHEDULER_BUSY_ERROR, SchedulerBusy, MssqlAdapter, error_numbers,
                                      is_data_error, is_login_refused, is_scheduler_busy, with_scheduler_guard)

SPEC = load_spec("tpch")
ODBC = "[Microsoft][ODBC Driver 18 for SQL Server]"


def server_error(cls, sqlstate: str, text: str, number: int):
    return cls(sqlstate, f"[{sqlstate}] {ODBC}[SQL Server]{text} ({number}) (SQLExecDirectW)")


BUSY = server_error(pyodbc.ProgrammingError, "42000", "switchyard: another load holds this scheduler",
                    SCHEDULER_BUSY_ERROR)
# A conversion error at row 51001: the number of the busy error, but as a row number.
BAD_ROW = server_error(pyodbc.DataError, "22018", "Bulk load data conversion error (type mismatch or invalid "
                       "character for the specified codepage) for row 51001, column 5 (o_orderdate).", 4864)
OUT_OF_RANGE = server_error(pyodbc.IntegrityError, "23000", 'The INSERT statement conflicted with the CHECK '
                            'constraint "orders_2_range". The conflict occurred in database "switchyard", table '
                            '"tpch_staging.orders_2", column \'o_orderkey\'.', 547)
LINK_LOST = pyodbc.OperationalError("08S01", f"[08S01] {ODBC}TCP Provider: Error code 0x2746 (10054) "
                                             "(SQLExecDirectW)")


# --- the policy alone ------------------------------------------------------------------------
def scripted(busy_answers: int):
    """An attempt function whose first `busy_answers` guarded calls find the scheduler taken."""
    calls: list[bool] = []

    def attempt(guard: bool) -> str:
        calls.append(guard)
        if guard and sum(calls) <= busy_answers:
            raise SchedulerBusy("taken")
        return "loaded"
    return attempt, calls


@pytest.mark.parametrize("busy", [0, 1, 3, 8])
def test_n_busy_answers_give_n_reconnects_then_success(busy):
    attempt, calls = scripted(busy)
    result, outcome = with_scheduler_guard(attempt, guard=True, retries=8)
    assert result == "loaded"
    assert calls == [True] * (busy + 1)
    assert (outcome.attempts, outcome.claimed, outcome.shared) == (busy + 1, True, False)


def test_exhausted_retries_load_without_the_claim_and_say_so():
    attempt, calls = scripted(busy_answers=100)
    result, outcome = with_scheduler_guard(attempt, guard=True, retries=3)
    assert result == "loaded"
    assert calls == [True, True, True, True, False]  # 3 reconnects after the first try, then unguarded
    assert (outcome.attempts, outcome.claimed, outcome.shared) == (5, False, True)


def test_without_the_guard_there_is_one_attempt():
    attempt, calls = scripted(busy_answers=100)
    _, outcome = with_scheduler_guard(attempt, guard=False, retries=3)
    assert calls == [False] and (outcome.claimed, outcome.shared) == (False, False)


# --- error classification ----------------------------------------------------------------------
def test_error_classification():
    assert error_numbers(BAD_ROW) == {4864} and error_numbers(BUSY) == {SCHEDULER_BUSY_ERROR}
    assert is_scheduler_busy(BUSY) and not is_scheduler_busy(BAD_ROW)
    assert is_data_error(BAD_ROW) and is_data_error(OUT_OF_RANGE)
    assert not is_data_error(LINK_LOST) and not is_data_error(BUSY)
    two = pyodbc.ProgrammingError("42000", f"[42000] {ODBC}[SQL Server]Cannot bulk load because the maximum "
                                           f"number of errors (0) was exceeded. (4865); [42000] {ODBC}[SQL Server]"
                                           f"Bulk load: An unexpected end of file was encountered in the data "
                                           f"file. (4832) (SQLExecDirectW)")
    assert error_numbers(two) == {4865, 4832} and is_data_error(two)
    # A lost connection stays retryable even when the message also names a data error.
    mixed = pyodbc.OperationalError("08S01", f"[08S01] {ODBC}Communication link failure (0); [22018] bad (4864)")
    assert not is_data_error(mixed)

    class DataError(Exception):  # a DB-API DataError of another driver (mssql-python's core)
        pass
    assert is_data_error(DataError("Received an invalid column length from the bcp client for colid 3."))


# --- a refused login or database fails at once ------------------------------------------------
LOGIN_FAILED = pyodbc.InterfaceError("28000", f"[28000] {ODBC}[SQL Server]Login failed for user 'loader'. "
                                              f"(18456) (SQLDriverConnect)")
NO_DATABASE = pyodbc.InterfaceError("42000", f'[42000] {ODBC}[SQL Server]Cannot open database "nope" requested '
                                             f"by the login. The login failed. (4060); [28000] {ODBC}[SQL Server]"
                                             f"Login failed for user 'loader'. (18456) (SQLDriverConnect)")
OFFLINE_DATABASE = pyodbc.InterfaceError("42000", f'[42000] {ODBC}[SQL Server]Cannot open database "nope" requested '
                                                  f"by the login. The login failed. (4060) (SQLDriverConnect)")
UNREACHABLE = pyodbc.OperationalError("HYT00", f"[HYT00] {ODBC}Login timeout expired (0) (SQLDriverConnect)")


@pytest.mark.parametrize("answer, permanent", [(LOGIN_FAILED, True), (NO_DATABASE, True), (OFFLINE_DATABASE, True),
                                                (UNREACHABLE, False)])
def test_a_refused_login_or_database_is_permanent_a_lost_server_is_not(answer, permanent, monkeypatch):
    """The driver's connect raises what the server answered; the adapter's own connect runs."""
    def refuse(*args, **kwargs):
        raise answer
    monkeypatch.setattr(pyodbc, "connect", refuse)
    assert is_login_refused(answer) is permanent
    a = MssqlAdapter(SPEC, uri="mssql://loader:secret@db.example:1433/switchyard")
    with pytest.raises(TargetError) as caught:
        a.prepare(plan_tpch(SPEC, 0.01, 3, tables=["orders"]).stream("orders", 1))
    assert caught.value.permanent is permanent
    assert ("the target refused the connection" in str(caught.value)) is permanent
    assert "db.example,1433" in str(caught.value) and "secret" not in str(caught.value)


# --- the adapter's load with scripted connections ----------------------------------------------
class ScriptedCursor:
    def __init__(self, session: "ScriptedSession"):
        self.session = session
        self.rowcount = -1
        self._row = None

    def execute(self, sql: str, *params):
        self.session.statements.append(sql)
        self._row = None
        if "FROM sys.dm_exec_sessions" in sql:
            self._row = (self.session.spid, 3, 3, 0, 2000, 10, 20, 30, "SIMPLE")
        elif "FROM sys.dm_os_host_info" in sql:
            self._row = ("Windows", 16)
        elif "BULK INSERT" in sql:
            # Like the server: the busy error comes from the claim, so only a guarded batch gets it.
            if self.session.answer is BUSY and "sp_getapplock" not in sql:
                pass
            elif self.session.answer is not None:
                raise self.session.answer
            self.rowcount = self.session.rows
        return self

    def fetchone(self):
        return self._row

    def fetchall(self):
        return []  # sys.columns' code pages: the staging table's text columns need none here

    def nextset(self):
        return False


class ScriptedSession:
    def __init__(self, spid: int, answer: Exception | None, rows: int):
        self.spid, self.answer, self.rows = spid, answer, rows
        self.statements: list[str] = []
        self.closed = False

    def cursor(self):
        return ScriptedCursor(self)

    def close(self):
        self.closed = True


class ScriptedAdapter(MssqlAdapter):
    """connect_odbc hands out the next scripted session; the answers are for the BULK INSERT batch
    (BUSY: this session's scheduler is claimed by another load)."""

    def __init__(self, answers: list[Exception | None], **options):
        super().__init__(SPEC, **options)
        self.answers = list(answers)
        self.sessions: list[ScriptedSession] = []
        self.watch_every = None  # no second connection watching the load: every session is scripted

    def connect_odbc(self, stream=None):
        answer = self.answers.pop(0) if self.answers else None
        self.sessions.append(ScriptedSession(51 + len(self.sessions), answer, rows=7))
        return self.sessions[-1]


@pytest.fixture
def stream_file(tmp_path):
    plan = plan_tpch(SPEC, 0.01, 3, tables=["orders"])
    s = plan.stream("orders", 2)
    path = tmp_path / "b" / s.file
    path.parent.mkdir(parents=True)
    path.write_text("x\n" * 7)
    return s, path


def load(answers, stream_file, **options):
    s, path = stream_file
    a = ScriptedAdapter(answers, local_data_root=path.parents[2], load_mode="bulk_insert", **options)
    return a, a.load(s, path)


def guarded(session: ScriptedSession) -> bool:
    (batch,) = [x for x in session.statements if "BULK INSERT" in x]
    assert "TRUNCATE TABLE [tpch_staging].[orders_2]" in batch
    return "sp_getapplock" in batch


def test_load_reconnects_on_each_busy_scheduler_then_loads(stream_file):
    a, result = load([BUSY, BUSY, BUSY, None], stream_file, guard_retries=8)
    assert result.rows == 7
    assert len(a.sessions) == 4 and all(s.closed for s in a.sessions)
    assert [guarded(s) for s in a.sessions] == [True] * 4
    assert result.details["attempts"] == 4
    assert result.details["scheduler_claimed"] is True and result.details["scheduler_shared"] is False
    assert result.details["session_id"] == 54  # the statistics are the successful session's
    # Not watched: how the load was logged comes from the recovery model's rules.
    assert result.details["logging"] == "minimal" and result.details["logging_basis"].startswith("rules (SIMPLE")


def test_load_without_a_free_scheduler_loads_anyway_and_records_it(stream_file):
    a, result = load([BUSY] * 10, stream_file, guard_retries=2)
    assert result.rows == 7
    # The first try and 2 reconnects hit busy schedulers; the 4th session loads unguarded.
    assert [guarded(s) for s in a.sessions] == [True, True, True, False]
    assert result.details["attempts"] == 4
    assert result.details["scheduler_shared"] is True and result.details["scheduler_claimed"] is False


@pytest.mark.parametrize("error", [BAD_ROW, OUT_OF_RANGE])
def test_a_data_error_is_permanent_and_not_retried(stream_file, error):
    s, path = stream_file
    a = ScriptedAdapter([error], local_data_root=path.parents[2])
    with pytest.raises(TargetError) as info:
        a.load(s, path)
    assert info.value.permanent is True
    assert str(path) in str(info.value) and "table orders, stream 2" in str(info.value)
    assert len(a.sessions) == 1 and a.sessions[0].closed


@pytest.mark.parametrize("orderdate, why", [("1996-01-02 10:00:00", "a time of day (10:00:00): date keeps the day"),
                                             ("1996-01-02Z", "a time zone (Z)")])
def test_a_field_bulk_insert_would_change_fails_the_load_naming_file_line_column(stream_file, orderdate, why):
    """BULK INSERT reads the file on the server and drops a date's time of day or zone without an
    error; the worker reads the file beside it and fails the load, the staging table never switched."""
    s, path = stream_file
    good = "1|36901|O|173665.47|1996-01-02|5-LOW|Clerk#000000951|0|nstructions sleep|\n"
    path.write_text(good * 3 + good.replace("1996-01-02", orderdate) + good)
    a = ScriptedAdapter([None], local_data_root=path.parents[2], load_mode="bulk_insert")
    with pytest.raises(TargetError) as info:
        a.load(s, path)
    assert info.value.permanent is True
    assert str(info.value).startswith(f"{path}: line 4, column o_orderdate: {orderdate!r}: {why}"), str(info.value)
    assert "staging table tpch_staging.orders_2 kept for inspection" in str(info.value)
    # The same file without it loads.
    path.write_text(good * 5)
    assert ScriptedAdapter([None], local_data_root=path.parents[2], load_mode="bulk_insert").load(s, path).rows == 7


def test_a_money_with_more_digits_than_sql_server_keeps_fails_the_bulk_insert_load(stream_file):
    """TPC-H's o_totalprice is money on SQL Server, which keeps 4 digits after the point and rounds
    the rest away as BULK INSERT reads the file, without an error: the worker's reading beside it
    fails the load, naming the file, the line and the column. 4 digits load."""
    s, path = stream_file
    good = "1|36901|O|173665.47|1996-01-02|5-LOW|Clerk#000000951|0|nstructions sleep|\n"
    path.write_text(good * 3 + good.replace("173665.47", "173665.47125") + good)
    a = ScriptedAdapter([None], local_data_root=path.parents[2], load_mode="bulk_insert")
    with pytest.raises(TargetError) as info:
        a.load(s, path)
    assert str(info.value).startswith(
        f"{path}: line 4, column o_totalprice: '173665.47125': 5 digits after the point, money keeps 4"), str(info.value)
    path.write_text(good * 3 + good.replace("173665.47", "173665.4712") + good)
    assert ScriptedAdapter([None], local_data_root=path.parents[2], load_mode="bulk_insert").load(s, path).rows == 7


def test_a_lost_connection_is_retryable(stream_file):
    s, path = stream_file
    a = ScriptedAdapter([LINK_LOST], local_data_root=path.parents[2])
    with pytest.raises(TargetError) as info:
        a.load(s, path)
    assert info.value.permanent is False
    assert "retry" in str(info.value) and len(a.sessions) == 1


def test_a_bad_line_in_the_tds_path_is_permanent(tmp_path):
    from switchyard.targets.mssql import FileRows
    path = tmp_path / "orders.1.tbl"
    path.write_text("1|36901|O|173665.47|1996-13-02|5-LOW|Clerk#000000951|0|x|\n")
    with pytest.raises(TargetError) as info:
        list(FileRows(path, SPEC.table("orders"), "mssql"))
    assert info.value.permanent is True


# --- the load's session, watched from a second connection ----------------------------------------
class WatchedCursor(ScriptedCursor):
    """SCRIPTED DMV ANSWERS for the watching connection: LOAD_SAMPLE_SQL's row for the loading
    session, its open batch growing by 2,500 rows (43 pages) per look, logged minimally."""

    looks = 0

    def execute(self, sql: str, *params):
        if "FROM sys.dm_tran_session_transactions" in sql or "sys.dm_tran_database_transactions" in sql:
            WatchedCursor.looks += 1
            k = WatchedCursor.looks
            self.session.statements.append(sql)
            self._row = (params[1], 7, 7, 1, 2001, 0, 0, 0, "BULK_LOGGED", 900, 60 * 43 * k, 4 * k, 2_500 * k, 43 * k)
            return self
        return super().execute(sql, *params)


def test_the_load_is_watched_and_its_logging_measured(stream_file):
    import threading
    import time
    s, path = stream_file
    a = ScriptedAdapter([None], local_data_root=path.parents[2], load_mode="bulk_insert")
    a.watch_every = 0.01
    loading = threading.Event()
    original = ScriptedCursor.execute

    def slow_bulk_insert(self, sql, *params):
        if "BULK INSERT" in sql:
            loading.set()
            time.sleep(0.3)  # the load runs while the watcher looks
        return original(self, sql, *params)

    class Adapter(type(a)):
        def connect_odbc(self, stream=None):
            session = super().connect_odbc(stream)
            if len(self.sessions) > 1:  # the watcher's connection
                session.cursor = lambda: WatchedCursor(session)
            return session
    a.__class__ = Adapter
    ScriptedCursor.execute = slow_bulk_insert
    try:
        result = a.load(s, path)
    finally:
        ScriptedCursor.execute = original
    assert loading.is_set() and len(a.sessions) == 2 and all(x.closed for x in a.sessions)
    assert a.sessions[1].statements and "sys.dm_tran_database_transactions" in a.sessions[1].statements[0]
    d = result.details
    assert d["logging"] == "minimal" and d["logging_basis"].startswith("measured") and d["log_ratio"] < 0.01
    assert d["recovery_model"] == "SIMPLE"  # the loading session's own word, read after the load


def test_text_the_server_would_not_store_exactly_turns_to_the_client_path(stream_file, monkeypatch):
    """SCRIPTED DMV ANSWERS: the staging table's varchar columns in code page 1252 on Windows,
    and a file with non-ASCII text: the load takes the client path, saying why, before any
    BULK INSERT; with text_check off it stays on BULK INSERT."""
    s, path = stream_file
    path.write_text("x\n" * 6 + "caf\u00e9\n", encoding="utf-8")

    class CodePages(ScriptedCursor):
        def fetchall(self):
            return [("o_comment", 1252)]

    from switchyard.targets.base import LoadResult
    turned = []

    def client_path(self, stream, path, progress):  # stands in for the TDS bulk copy
        turned.append(stream)
        return LoadResult(rows=7, bytes=0, seconds=0.0, details={"mode": "tds"})

    a = ScriptedAdapter([None], local_data_root=path.parents[2], load_mode="bulk_insert")
    monkeypatch.setattr(ScriptedSession, "cursor", lambda session: CodePages(session))
    monkeypatch.setattr(type(a), "_load_tds", client_path)
    result = a.load(s, path)
    assert turned == [s] and not any("BULK INSERT" in x for x in a.sessions[0].statements)
    assert "non-ASCII text" in result.details["load_path"] and "o_comment (code page 1252)" in result.details["load_path"]
    b = ScriptedAdapter([None], local_data_root=path.parents[2], load_mode="bulk_insert", text_check=False)
    assert b.load(s, path).rows == 7 and any("BULK INSERT" in x for x in b.sessions[0].statements)


def test_an_empty_field_in_a_not_null_column_turns_to_the_client_path(stream_file, monkeypatch):
    """SCRIPTED SESSION: the BULK INSERT (KEEPNULLS: an empty field is NULL, never a default)
    fails with SQL Server's 515 on a NOT NULL column: the load goes the client path, which stores
    the empty string the spec means, and says why."""
    s, path = stream_file
    from switchyard.targets.base import LoadResult
    turned = []

    def client_path(self, stream, path, progress):  # stands in for the TDS bulk copy
        turned.append(stream)
        return LoadResult(rows=7, bytes=0, seconds=0.0, details={"mode": "tds"})

    null = server_error(pyodbc.IntegrityError, "23000", "Cannot insert the value NULL into column 'o_comment', "
                        "table 'switchyard.tpch_staging.orders_2'; column does not allow nulls. INSERT fails.", 515)
    a = ScriptedAdapter([null], local_data_root=path.parents[2], load_mode="bulk_insert")
    monkeypatch.setattr(type(a), "_load_tds", client_path)
    result = a.load(s, path)
    assert turned == [s] and "KEEPNULLS" in next(x for x in a.sessions[0].statements if "BULK INSERT" in x)
    assert "an empty field in a NOT NULL column" in result.details["load_path"]


# --- every step: what is never retried ------------------------------------------------------------
DUPLICATE = server_error(pyodbc.IntegrityError, "23000", "Cannot insert duplicate key row in object "
                         "'tpch.orders' with unique index 'ix_orders_dba'. The duplicate key value is (42).", 2601)
NO_TABLE = server_error(pyodbc.ProgrammingError, "42S02", "Invalid object name 'tpch.orderz'.", 208)
NO_PERMISSION = server_error(pyodbc.ProgrammingError, "42000", "The SELECT permission was denied on the object "
                             "'orders', database 'switchyard', schema 'tpch'.", 229)
DEADLOCK = server_error(pyodbc.ProgrammingError, "40001", "Transaction (Process ID 61) was deadlocked on lock "
                        "resources with another process and has been chosen as the deadlock victim. Rerun the "
                        "transaction.", 1205)
LOCK_TIMEOUT = server_error(pyodbc.OperationalError, "HY000", "Lock request time out period exceeded.", 1222)
FULL_TEXT = server_error(pyodbc.ProgrammingError, "42000", "ALTER TABLE SWITCH statement failed because the table "
                         "'switchyard.tpch.orders' has fulltext index on it.", 4918)
NEW_INDEX = server_error(pyodbc.ProgrammingError, "42000", "ALTER TABLE SWITCH statement failed. There is no identical "
                         "index in source table 'switchyard.tpch_staging.orders_2' for the index 'ix_new' in target "
                         "table 'switchyard.tpch.orders' .", 4947)
READ_ONLY = server_error(pyodbc.ProgrammingError, "42000", "Could not truncate object 'tpch.orders' because it or one "
                         "of its indexes resides on a READONLY filegroup 'fg_2019'.", 4707)


@pytest.mark.parametrize("error, expected", [
    (DUPLICATE, "a unique violation"), (OUT_OF_RANGE, "a constraint violation"), (BAD_ROW, "a data error"),
    (NO_TABLE, "a missing object"), (NO_PERMISSION, "a refused permission"),
    (FULL_TEXT, "a switch or truncate the table refuses as it is"),
    (NEW_INDEX, "a switch or truncate the table refuses as it is"),
    (READ_ONLY, "a switch or truncate the table refuses as it is"),
    (DEADLOCK, None), (LOCK_TIMEOUT, None), (LINK_LOST, None), (BUSY, None)])
def test_each_step_fails_at_once_on_an_error_a_retry_cannot_fix(error, expected):
    from switchyard.targets import permanent_reason
    assert MssqlAdapter.permanent_error(error) == expected
    # Wrapped by a step's own TargetError (not marked permanent), the cause decides.
    try:
        try:
            raise error
        except pyodbc.Error as exc:
            raise TargetError("tpch.orders: the commit failed") from exc
    except TargetError as wrapped:
        assert permanent_reason(MssqlAdapter, wrapped) == expected
