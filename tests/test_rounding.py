"""Values as TiDB stores them (rounding.py): rounded to the column's scale/fsp where events are built, never
where messages are decoded.

The input/expected pairs marked "TiDB" are copied from pingcap/tidb's own tests:
- types/mydecimal_test.go TestRoundWithHalfEven (which rounds with ModeHalfUp, scales >= 0 kept)
- types/datum_test.go TestProduceDecWithSpecifiedTp (rounding then clamping to the column)
- types/time_test.go TestParseFrac, TestRoundFrac, TestDateTime (fspTbl), TestTimeFsp
(pkg/types/... in newer trees). Durations written there as "1 11:30:45" (a day) are written 35:30:45 here,
the form event lines use.
"""

from __future__ import annotations

import datetime as dt
import logging
from decimal import Decimal

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from changefeed import workload, workload_columns
from changefeed.canal import CanalJSONDecoder, CanalJSONEncoder
from changefeed.config import build_config
from changefeed.errors import DecodeError
from changefeed.eventline import EventReader, EventWriter, event_to_obj
from changefeed.model import Column, Event, Kind, TableInfo
from changefeed.mysql.convert import RowConverter
from changefeed.mysqltypes import Family
from changefeed.rounding import round_datetime, round_decimal, round_frac, round_time

# --- DECIMAL ------------------------------------------------------------------------------------

# TiDB: types/mydecimal_test.go TestRoundWithHalfEven (Round(..., ModeHalfUp)), non-negative scales
TIDB_DECIMAL_ROUND = [
    ("123456789.987654321", 1, "123456790.0"),
    ("15.1", 0, "15"),
    ("15.5", 0, "16"),
    ("15.9", 0, "16"),
    ("-15.1", 0, "-15"),
    ("-15.5", 0, "-16"),
    ("-15.9", 0, "-16"),
    ("15.1", 1, "15.1"),
    ("-15.1", 1, "-15.1"),
    ("15.17", 1, "15.2"),
    (".999", 0, "1"),
]


@pytest.mark.parametrize(("text", "scale", "want"), TIDB_DECIMAL_ROUND)
def test_decimal_round_half_up_as_tidb(text, scale, want):
    assert round_decimal(text, 65, scale) == (want, None)


# TiDB: types/datum_test.go TestProduceDecWithSpecifiedTp (dec, flen, frac, newDec, isOverflow)
TIDB_PRODUCE_DEC = [
    ("0.0000", 4, 3, "0.000", False),
    ("0.0001", 4, 3, "0.000", False),
    ("123", 8, 5, "123.00000", False),
    ("-123", 8, 5, "-123.00000", False),
    ("123.899", 5, 2, "123.90", False),
    ("-123.899", 5, 2, "-123.90", False),
    ("123.899", 6, 2, "123.90", False),
    ("-123.899", 6, 2, "-123.90", False),
    ("123.99", 4, 1, "124.0", False),
    ("123.99", 3, 0, "124", False),
    ("-123.99", 3, 0, "-124", False),
    ("123.99", 3, 1, "99.9", True),
    ("-123.99", 3, 1, "-99.9", True),
    ("99.9999", 5, 3, "99.999", True),
    ("-99.9999", 5, 3, "-99.999", True),
    ("99.9999", 6, 3, "100.000", False),
    ("-99.9999", 6, 3, "-100.000", False),
]


@pytest.mark.parametrize(("text", "flen", "frac", "want", "overflow"), TIDB_PRODUCE_DEC)
def test_decimal_fits_its_column_as_tidb(text, flen, frac, want, overflow):
    r = round_decimal(text, flen, frac)
    assert r.value == want
    assert (r.note is not None) is overflow


@pytest.mark.parametrize(("text", "p", "s", "want"), [
    ("153.123", 10, 2, "153.12"),
    ("153.125", 10, 2, "153.13"),
    ("-153.125", 10, 2, "-153.13"),
    ("1.5", 10, 0, "2"),
    ("-0.001", 10, 2, "0.00"),  # no negative zero
    ("-0", 10, 0, "0"),
    ("0", 5, 5, "0.00000"),
    ("007.1", 10, 2, "7.10"),
    ("+.5", 10, 1, "0.5"),
    ("-99999999999999999999999999999999998.000000000000000000000000000000", 65, 30,
     "-99999999999999999999999999999999998.000000000000000000000000000000"),
])
def test_decimal_round_examples(text, p, s, want):
    assert round_decimal(text, p, s) == (want, None)


def test_decimal_overflow_is_clamped():
    assert round_decimal("99999999.995", 10, 2).value == "99999999.99"
    assert round_decimal("99999999.995", 10, 2).note == "out of range"
    assert round_decimal("-123456789012", 10, 2).value == "-99999999.99"
    assert round_decimal("1" + "0" * 80, 65, 30).value == "9" * 35 + "." + "9" * 30


def test_decimal_negative_unsigned_is_zero():
    assert round_decimal("-1.5", 10, 2, unsigned=True) == ("0.00", "negative in an unsigned column")
    assert round_decimal("-0.001", 10, 2, unsigned=True) == ("0.00", None)  # rounds to 0 first


# --- fractional seconds --------------------------------------------------------------------------

# TiDB: types/time_test.go TestParseFrac (digits, fsp, microseconds, overflow)
TIDB_PARSE_FRAC = [
    ("1234567", 0, 0, False),
    ("1234567", 1, 100000, False),
    ("0000567", 5, 60, False),
    ("1234567", 5, 123460, False),
    ("1234567", 6, 123457, False),
    ("123", 4, 123000, False),
    ("123", 5, 123000, False),
    ("123", 6, 123000, False),
    ("11", 6, 110000, False),
    ("01", 3, 10000, False),
    ("012", 4, 12000, False),
    ("0123", 5, 12300, False),
    ("9999999", 6, 0, True),
    ("999999", 5, 0, True),
    ("999", 2, 0, True),
    ("999", 3, 999000, False),
]


@pytest.mark.parametrize(("digits", "fsp", "us", "overflow"), TIDB_PARSE_FRAC)
def test_parse_frac_as_tidb(digits, fsp, us, overflow):
    assert round_frac(digits, fsp) == (us, overflow)


# TiDB: types/time_test.go TestRoundFrac (datetime rows, both time zones: the zone plays no part here) and
# TestDateTime's fspTbl rows written in the canonical form
TIDB_DATETIME = [
    ("2012-12-31 11:30:45.123456", 4, "2012-12-31 11:30:45.1235"),
    ("2012-12-31 11:30:45.123456", 6, "2012-12-31 11:30:45.123456"),
    ("2012-12-31 11:30:45.123456", 0, "2012-12-31 11:30:45"),
    ("2012-12-31 11:30:45.123456", 1, "2012-12-31 11:30:45.1"),
    ("2012-12-31 11:30:45.999999", 4, "2012-12-31 11:30:46.0000"),
    ("2012-12-31 11:30:45.999999", 0, "2012-12-31 11:30:46"),
    ("2012-00-00 11:30:45.999999", 3, "2012-00-00 11:30:46.000"),
    ("2011-11-11 10:10:10.888888", 0, "2011-11-11 10:10:11"),
    ("2011-11-11 10:10:10.111111", 0, "2011-11-11 10:10:10"),
    ("2019-11-25 07:25:45.123456", 4, "2019-11-25 07:25:45.1235"),
    ("2019-11-25 07:25:45.123456", 5, "2019-11-25 07:25:45.12346"),
    ("2019-11-25 07:25:45.123456", 0, "2019-11-25 07:25:45"),
    ("2019-11-25 07:25:45.123456", 2, "2019-11-25 07:25:45.12"),
    ("2019-11-26 11:30:45.999999", 4, "2019-11-26 11:30:46.0000"),
    ("2019-11-26 11:30:45.999999", 0, "2019-11-26 11:30:46"),
    ("2019-11-26 11:30:45.999999", 3, "2019-11-26 11:30:46.000"),
    ("2017-01-05 23:59:59.575601", 0, "2017-01-06 00:00:00"),
    ("2017-01-31 23:59:59.575601", 0, "2017-02-01 00:00:00"),
    ("2017-00-05 23:59:58.575601", 3, "2017-00-05 23:59:58.576"),
]


@pytest.mark.parametrize(("text", "fsp", "want"), TIDB_DATETIME)
def test_datetime_round_as_tidb(text, fsp, want):
    assert round_datetime(text, fsp) == (want, None)


@pytest.mark.parametrize(("text", "fsp", "want"), [
    ("2020-12-31 23:59:59.5", 0, "2021-01-01 00:00:00"),  # carries into the year
    ("2020-02-28 23:59:59.95", 1, "2020-02-29 00:00:00.0"),  # a leap day
    ("2021-02-28 23:59:59.95", 1, "2021-03-01 00:00:00.0"),
    ("2020-01-01 00:00:00.1", 3, "2020-01-01 00:00:00.100"),  # written with the column's digits
    ("2020-01-01 00:00:00", 2, "2020-01-01 00:00:00.00"),
    ("2020-01-01 00:00:00.49", 0, "2020-01-01 00:00:00"),
    ("0000-00-00 00:00:00", 0, "0000-00-00 00:00:00"),
    ("0000-00-00 00:00:00.000000", 0, "0000-00-00 00:00:00"),
])
def test_datetime_round_examples(text, fsp, want):
    assert round_datetime(text, fsp) == (want, None)


def test_datetime_past_its_range_is_the_zero_datetime():
    assert round_datetime("9999-12-31 23:59:59.5", 0) == ("0000-00-00 00:00:00", "out of range after rounding")
    assert round_datetime("9999-12-31 23:59:59.9995", 3).value == "0000-00-00 00:00:00.000"
    assert round_datetime("2012-01-00 23:59:59.9999", 3).value == "0000-00-00 00:00:00.000"  # no day to carry to


# TiDB: types/time_test.go TestRoundFrac (duration rows; "1 11:30:45" written 35:30:45) and TestTimeFsp
TIDB_TIME = [
    ("11:30:45.123456", 4, "11:30:45.1235"),
    ("11:30:45.123456", 6, "11:30:45.123456"),
    ("11:30:45.123456", 0, "11:30:45"),
    ("35:30:45.123456", 1, "35:30:45.1"),
    ("35:30:45.999999", 4, "35:30:46.0000"),
    ("-35:30:45.999999", 0, "-35:30:46"),
    ("00:00:00.1", 0, "00:00:00"),
    ("00:00:00.1", 1, "00:00:00.1"),
    ("00:00:00.777777", 2, "00:00:00.78"),
    ("00:00:00.777777", 6, "00:00:00.777777"),
    ("00:00:00.001", 3, "00:00:00.001"),
    ("08:29:59.537368", 0, "08:30:00"),
    ("08:59:59.537368", 0, "09:00:00"),
]


@pytest.mark.parametrize(("text", "fsp", "want"), TIDB_TIME)
def test_time_round_as_tidb(text, fsp, want):
    assert round_time(text, fsp) == (want, None)


@pytest.mark.parametrize(("text", "fsp", "want"), [
    ("-00:00:00.5", 0, "-00:00:01"),  # the magnitude rounds half up: away from zero
    ("-00:00:00.4", 0, "00:00:00"),  # no negative zero
    ("12:34:56.123456", 4, "12:34:56.1235"),
    ("23:59:59.5", 0, "24:00:00"),  # a time is not a clock: hours go on past 24
    ("837:59:59.5", 0, "838:00:00"),
    ("-838:59:59", 0, "-838:59:59"),
    ("01:00:00", 3, "01:00:00.000"),
])
def test_time_round_examples(text, fsp, want):
    assert round_time(text, fsp) == (want, None)


def test_time_past_838_hours_is_clamped():
    assert round_time("838:59:59.5", 0) == ("838:59:59", "out of range")
    assert round_time("-838:59:59.5", 1) == ("-838:59:59.0", "out of range")
    assert round_time("838:59:59.4", 0) == ("838:59:59", None)


# --- where events are built ---------------------------------------------------------------------

COLS = [
    {"name": "id", "mysqlType": "int", "primaryKey": True, "nullable": False},
    {"name": "amount", "mysqlType": "decimal(10,2)"},
    {"name": "price", "mysqlType": "decimal(10,2) unsigned"},
    {"name": "d0", "mysqlType": "datetime(0)"},
    {"name": "d1", "mysqlType": "datetime(1)"},
    {"name": "t4", "mysqlType": "time(4)"},
    {"name": "ts5", "mysqlType": "timestamp(5)"},
    {"name": "bare_dt", "mysqlType": "datetime"},
    {"name": "bare_dec", "mysqlType": "decimal"},
    {"name": "f", "mysqlType": "double(10,2)"},
    {"name": "e", "mysqlType": "enum('a','b')"},
    {"name": "s", "mysqlType": "set('x','y')"},
]


def _line(after: dict) -> dict:
    return {"kind": "insert", "commitTs": 1, "table": {"schema": "db", "table": "t", "columns": COLS},
            "after": {"id": 1, **after}}


def test_event_line_values_are_stored_as_tidb_would():
    ev = EventReader().from_obj(_line({
        "amount": "153.123", "price": 153.125, "d0": "2020-12-31 23:59:59.5", "d1": "2020-01-01T12:34:56.123456",
        "t4": "12:34:56.123456", "ts5": "2020-01-01 12:34:56.123456", "f": 1.23456}))
    assert ev.after == {"id": 1, "amount": "153.12", "price": "153.13", "d0": "2021-01-01 00:00:00",
                        "d1": "2020-01-01 12:34:56.1", "t4": "12:34:56.1235", "ts5": "2020-01-01 12:34:56.12346",
                        "f": 1.23456}  # float(M,D): left as given
    obj = event_to_obj(ev)
    assert obj["after"]["amount"] == "153.12"


def test_event_line_bare_types_are_kept_as_given():
    # a bare `datetime` / `decimal` in an event line may be canal-json's short mysqlType, which drops the
    # fsp and scale: nothing to round to
    ev = EventReader().from_obj(_line({"bare_dt": "2020-01-01 12:34:56.123456", "bare_dec": "1.23456"}))
    assert ev.after["bare_dt"] == "2020-01-01 12:34:56.123456"
    assert ev.after["bare_dec"] == "1.23456"


def test_event_line_overflow_and_strange_members_warn_once(caplog):
    reader = EventReader()
    with caplog.at_level(logging.WARNING, logger="changefeed.values"):
        ev = reader.from_obj(_line({"amount": "99999999.995", "e": "c", "s": "x,w"}))
        again = reader.from_obj(_line({"amount": "123456789", "e": 7, "s": 9}))
    assert ev.after == {"id": 1, "amount": "99999999.99", "e": 0, "s": 0}
    assert again.after == {"id": 1, "amount": "99999999.99", "e": 0, "s": 0}
    lines = [r.getMessage() for r in caplog.records if r.name == "changefeed.values"]
    assert len(lines) == 3, lines  # once per column
    assert any("amount" in m and "99999999.99" in m for m in lines)
    assert any(m.startswith("column e enum('a','b'): 'c' is not a member") for m in lines)
    assert all("\n" not in m for m in lines)


def test_event_line_values_of_the_wrong_kind_still_fail():
    with pytest.raises(DecodeError):
        EventReader().from_obj(_line({"amount": "abc"}))
    with pytest.raises(DecodeError):
        EventReader().from_obj(_line({"e": [1]}))
    with pytest.raises(DecodeError):
        EventReader().from_obj(_line({"d0": "2020-13-01 00:00:00"}))


def test_workload_events_are_rounded(monkeypatch):
    raw = workload_columns.raw_generator

    def sloppy(rng, col):
        gen = raw(rng, col)
        fam = col.type.family
        if fam is Family.DECIMAL:
            return lambda: (gen(), "1.125")[1]
        if fam in (Family.DATETIME, Family.TIMESTAMP):
            return lambda: (gen(), "2020-12-31 23:59:59.999999")[1]
        if fam is Family.TIME:
            return lambda: (gen(), "-00:00:00.5")[1]
        return gen

    monkeypatch.setattr(workload_columns, "raw_generator", sloppy)
    w = workload.Workload(seed=2, transactions=60)
    seen: dict[str, set] = {}
    for ev in w:
        for row in (ev.before, ev.after):
            for name, v in (row or {}).items():
                if v is not None:
                    seen.setdefault(name, set()).add(v)
    assert seen["balance"] == {"1.13"}  # decimal(14,2)
    assert seen["amount"] == {"1.13"}  # decimal(10,2), then decimal(12,2)
    assert seen["seen"] == {"2020-12-31 23:59:59.999999"}  # datetime(6)
    assert seen["updated"] == {"2021-01-01 00:00:00.000"}  # timestamp(3)
    assert seen["alarm"] == {"-00:00:01"}  # a bare `time` in CREATE TABLE: fsp 0
    assert seen["at"] == {"2021-01-01 00:00:00"}  # a bare `datetime`: fsp 0
    users = w.state.tables[("app", "users")]
    assert {r["balance"] for r in users.rows.values()} <= {"1.13", None}


def test_binlog_rows_are_rounded_and_strange_sets_become_empty(caplog):
    t = TableInfo("db", "t", [Column("id", "int", nullable=False, primary_key=True), Column("amount", "decimal(10,2)"),
                              Column("at", "datetime"), Column("dur", "time"), Column("s", "set('x','y')")])
    conv = RowConverter(t)
    with caplog.at_level(logging.WARNING, logger="changefeed.values"):
        row = conv.row({"id": 1, "amount": Decimal("153.125"), "at": dt.datetime(2020, 1, 1, 0, 0, 0),
                        "dur": dt.timedelta(seconds=-1), "s": {"x", "w"}}, None)
    assert row == {"id": 1, "amount": "153.13", "at": "2020-01-01 00:00:00", "dur": "-00:00:01", "s": 0}
    assert any(r.getMessage().startswith("column s set('x','y')") for r in caplog.records)


# --- decoders keep what the message says ----------------------------------------------------------


def test_canal_json_short_mysql_type_keeps_microseconds_and_scale():
    t = TableInfo("db", "t", [Column("id", "int", nullable=False, primary_key=True), Column("at", "datetime(6)"),
                              Column("amount", "decimal(12,6)"), Column("dur", "time(6)")])
    after = {"id": 1, "at": "2020-01-01 12:34:56.123456", "amount": "1.123456", "dur": "12:34:56.654321"}
    cfg = build_config("canal-json")
    [msg] = CanalJSONEncoder(cfg, clock_ms=lambda: 1_700_000_000_000).encode(
        Event(Kind.INSERT, commit_ts=1 << 18, table=t, after=after))
    assert orjson.loads(msg.value)["mysqlType"] == {"id": "int", "at": "datetime", "amount": "decimal",
                                                   "dur": "time"}
    [got] = CanalJSONDecoder(cfg).decode(msg.value)
    assert got.after == after
    # and an event line of the decoded event, read again, keeps them too (bare types are not rounded there)
    again = EventReader().parse(EventWriter().line(got))
    assert again.after == after


# --- the storer's shortcut for values already held as TiDB holds them agrees with the rounding -------

_DIGITS = st.text("0123456789", min_size=1, max_size=9)


@settings(max_examples=300, deadline=None)
@given(sign=st.sampled_from(["", "-"]), whole=_DIGITS, frac=st.text("0123456789", max_size=4),
       mt=st.sampled_from(["decimal(6,2)", "decimal(4,0)", "decimal(3,3)", "decimal(6,2) unsigned"]))
def test_stored_decimal_is_the_rounded_one(sign, whole, frac, mt):
    col = Column("c", mt)
    v = sign + whole + ("." + frac if frac else "")
    ct = col.type
    assert col.store(v) == round_decimal(v, ct.display_length, ct.scale, ct.unsigned).value


@settings(max_examples=300, deadline=None)
@given(neg=st.booleans(), secs=st.integers(0, 838 * 3600 + 59 * 60 + 59), frac=st.text("0123456789", max_size=6),
       fsp=st.integers(0, 6))
def test_stored_time_and_datetime_are_the_rounded_ones(neg, secs, frac, fsp):
    f = "." + frac if frac else ""
    t = ("-" if neg else "") + f"{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}" + f
    assert Column("t", f"time({fsp})").store(t) == round_time(t, fsp).value
    d = (dt.datetime(2020, 1, 1) + dt.timedelta(seconds=secs)).strftime("%Y-%m-%d %H:%M:%S") + f
    assert Column("d", f"datetime({fsp})").store(d) == round_datetime(d, fsp).value
