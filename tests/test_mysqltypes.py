"""The MySQL/TiDB type system: ColumnType.parse, TiDB's display defaults and type strings, the value
normalizers (event-line JSON value -> datum, REFERENCE-NOTES §0) and Go's float formatting.

Expected values come from TiDB's behaviour (parser/types FieldType, CompactStr, format.OutputFormat,
BinaryJSON), TiCDC's mounter (REFERENCE-NOTES §0) and, for floats, Go's own strconv output
(tests/golden/go_formatfloat.json, see tests/golden/README.md).
"""

from __future__ import annotations

import math
import struct
from pathlib import Path

import pytest

from changefeed.mysqltypes import (
    UNSPECIFIED,
    ColumnType,
    Family,
    TypeParseError,
    ValueError_,
    canonical_float32,
    go_format_float64,
    make_json_out,
    make_normalizer,
    shortest_float32,
    tidb_json_text,
    to_float32,
)
from tests.conftest import load_json

GO_FLOATS = load_json(Path(__file__).parent / "golden" / "go_formatfloat.json")

U64_MAX = (1 << 64) - 1
I64_MIN = -(1 << 63)
I64_MAX = (1 << 63) - 1


def parse(text: str, charset: str | None = None, collate: str | None = None) -> ColumnType:
    return ColumnType.parse(text, charset, collate)


def norm(type_text: str):
    return make_normalizer(parse(type_text))


# =================================================================================================
# ColumnType.parse: names and aliases
# =================================================================================================

# text -> (canonical name, flen, decimal, unsigned, is_bool)
ALIASES = {
    "integer": ("int", UNSPECIFIED, UNSPECIFIED, False, False),
    "INTEGER(5)": ("int", 5, UNSPECIFIED, False, False),
    "bool": ("tinyint", 1, UNSPECIFIED, False, True),
    "BOOLEAN": ("tinyint", 1, UNSPECIFIED, False, True),
    "real": ("double", UNSPECIFIED, UNSPECIFIED, False, False),
    "numeric": ("decimal", UNSPECIFIED, UNSPECIFIED, False, False),
    "numeric(12,6)": ("decimal", 12, 6, False, False),
    "dec(5)": ("decimal", 5, UNSPECIFIED, False, False),
    "fixed(5,1)": ("decimal", 5, 1, False, False),
    "character varying(10)": ("varchar", 10, UNSPECIFIED, False, False),
    "char varying(3)": ("varchar", 3, UNSPECIFIED, False, False),
    "national char(3)": ("char", 3, UNSPECIFIED, False, False),
    "national character(3)": ("char", 3, UNSPECIFIED, False, False),
    "nchar(2)": ("char", 2, UNSPECIFIED, False, False),
    "nvarchar(7)": ("varchar", 7, UNSPECIFIED, False, False),
    "national varchar(7)": ("varchar", 7, UNSPECIFIED, False, False),
    "character(4)": ("char", 4, UNSPECIFIED, False, False),
    "double precision": ("double", UNSPECIFIED, UNSPECIFIED, False, False),
    "double  precision(10,2)": ("double", 10, 2, False, False),
    "float8": ("double", UNSPECIFIED, UNSPECIFIED, False, False),
    "float4": ("float", UNSPECIFIED, UNSPECIFIED, False, False),
    # float(p) is a precision in bits: 0..24 is FLOAT, 25..53 is DOUBLE, and it is not a display length
    "float(0)": ("float", UNSPECIFIED, UNSPECIFIED, False, False),
    "float(24)": ("float", UNSPECIFIED, UNSPECIFIED, False, False),
    "float(25)": ("double", UNSPECIFIED, UNSPECIFIED, False, False),
    "float(53)": ("double", UNSPECIFIED, UNSPECIFIED, False, False),
    "float(10,3)": ("float", 10, 3, False, False),
    "serial": ("bigint", UNSPECIFIED, UNSPECIFIED, True, False),
    "int1": ("tinyint", UNSPECIFIED, UNSPECIFIED, False, False),
    "int2": ("smallint", UNSPECIFIED, UNSPECIFIED, False, False),
    "int3": ("mediumint", UNSPECIFIED, UNSPECIFIED, False, False),
    "middleint": ("mediumint", UNSPECIFIED, UNSPECIFIED, False, False),
    "int4": ("int", UNSPECIFIED, UNSPECIFIED, False, False),
    "int8": ("bigint", UNSPECIFIED, UNSPECIFIED, False, False),
    "long varchar": ("mediumtext", UNSPECIFIED, UNSPECIFIED, False, False),
    "long": ("mediumtext", UNSPECIFIED, UNSPECIFIED, False, False),
    "long varbinary": ("mediumblob", UNSPECIFIED, UNSPECIFIED, False, False),
    "var_string(9)": ("varchar", 9, UNSPECIFIED, False, False),
    "BigInt(20) UNSIGNED": ("bigint", 20, UNSPECIFIED, True, False),
    "  int ( 11 )  ": ("int", 11, UNSPECIFIED, False, False),
}


@pytest.mark.parametrize("text", list(ALIASES))
def test_parse_aliases(text):
    name, flen, dec, unsigned, is_bool = ALIASES[text]
    t = parse(text)
    assert (t.name, t.flen, t.decimal, t.unsigned, t.is_bool) == (name, flen, dec, unsigned, is_bool)


@pytest.mark.parametrize("name", ["tinyint", "smallint", "mediumint", "int", "bigint", "float", "double",
                                  "decimal", "date", "datetime", "timestamp", "time", "year", "char", "varchar",
                                  "tinytext", "text", "mediumtext", "longtext", "binary", "varbinary", "tinyblob",
                                  "blob", "mediumblob", "longblob", "enum", "set", "bit", "json"])
def test_canonical_names_parse_to_themselves(name):
    # canal-json's default mysqlType is the bare name; the decoder parses it back
    t = parse(name)
    assert t.name == name
    assert parse(name.upper()).name == name
    assert t.short_str() == name


def test_families():
    expected = {
        "tinyint": Family.INT, "bigint unsigned": Family.INT, "float": Family.FLOAT, "double": Family.FLOAT,
        "decimal(5,2)": Family.DECIMAL, "date": Family.DATE, "datetime(3)": Family.DATETIME,
        "timestamp": Family.TIMESTAMP, "time(6)": Family.TIME, "year": Family.YEAR, "char(3)": Family.STRING,
        "text": Family.STRING, "binary(3)": Family.BYTES, "blob": Family.BYTES, "enum('a')": Family.ENUM,
        "set('a')": Family.SET, "bit(3)": Family.BIT, "json": Family.JSON,
    }
    assert {k: parse(k).family for k in expected} == expected


# =================================================================================================
# Attributes: unsigned / zerofill / binary / charset / collate
# =================================================================================================


def test_unsigned_and_zerofill():
    t = parse("int(10) unsigned")
    assert t.unsigned and not t.zerofill
    # zerofill implies unsigned, as in MySQL
    t = parse("int(5) zerofill")
    assert t.unsigned and t.zerofill
    assert t.short_str() == "int unsigned zerofill"
    assert t.full_str() == "int(5) unsigned zerofill"
    assert parse("smallint signed").unsigned is False
    assert parse("decimal(10,2) unsigned").unsigned
    assert parse("double zerofill").zerofill
    # bit and year accept (and drop) UNSIGNED; year keeps its zerofill out of the type strings
    for text in ("bit(3) unsigned", "year unsigned", "year zerofill", "bit(3) zerofill"):
        t = parse(text)
        assert not t.unsigned, text
        assert " unsigned" not in t.short_str() and " zerofill" not in t.full_str()


@pytest.mark.parametrize("text", ["varchar(10) unsigned", "text unsigned", "date zerofill", "json unsigned",
                                  "enum('a') unsigned", "blob unsigned"])
def test_unsigned_on_a_non_numeric_type_is_an_error(text):
    with pytest.raises(TypeParseError, match="UNSIGNED does not apply"):
        parse(text)


def test_charset_and_collate_spellings():
    for text in ("varchar(10) character set latin1", "varchar(10) charset latin1", "varchar(10) CHAR SET latin1",
                 "varchar(10) character set = latin1", "varchar(10) CHARACTER SET LATIN1"):
        t = parse(text)
        assert (t.charset, t.effective_charset, t.effective_collate) == ("latin1", "latin1", "latin1_bin"), text
    t = parse("varchar(10) charset utf8mb4 collate utf8mb4_general_ci")
    assert (t.charset, t.collate) == ("utf8mb4", "utf8mb4_general_ci")
    t = parse("text collate = utf8mb4_unicode_ci")
    assert (t.effective_charset, t.effective_collate) == ("utf8mb4", "utf8mb4_unicode_ci")
    # defaults: utf8mb4 / utf8mb4_bin for strings, binary for everything else
    assert (parse("char(1)").effective_charset, parse("char(1)").effective_collate) == ("utf8mb4", "utf8mb4_bin")
    assert (parse("int").effective_charset, parse("int").effective_collate) == ("binary", "binary")
    assert parse("json").effective_charset == "binary"
    # ascii / unicode shorthands
    assert parse("char(10) ascii").charset == "latin1"
    assert parse("char(10) unicode").charset == "ucs2"
    # charset/collate given beside the type (as a table definition carries them) win over the text
    t = parse("varchar(5) charset latin1", charset="gbk", collate="gbk_chinese_ci")
    assert (t.charset, t.collate) == ("gbk", "gbk_chinese_ci")


def test_character_set_binary_makes_a_binary_string_type():
    t = parse("char(10) character set binary")
    assert (t.name, t.flen, t.is_binary, t.family) == ("binary", 10, True, Family.BYTES)
    assert (t.short_str(), t.full_str()) == ("binary", "binary(10)")
    assert parse("varchar(20) charset binary").full_str() == "varbinary(20)"
    assert parse("text character set binary").name == "blob"
    assert parse("tinytext charset binary").name == "tinyblob"
    assert parse("mediumtext charset binary").name == "mediumblob"
    assert parse("longtext charset binary").name == "longblob"
    # the charset may come from the column's own charset field
    assert parse("char(4)", charset="binary").name == "binary"
    # binary types are charset binary whatever the text says
    t = parse("varbinary(8)")
    assert (t.charset, t.collate, t.effective_charset) == ("binary", "binary", "binary")


def test_binary_attribute_is_a_collation_not_the_binary_charset():
    # `varchar(10) binary` is a _bin collation of the column's charset; the column stays a text column
    t = parse("varchar(10) binary")
    assert (t.name, t.is_binary, t.family) == ("varchar", False, Family.STRING)
    assert (t.effective_charset, t.effective_collate) == ("utf8mb4", "utf8mb4_bin")
    assert t.short_str() == "varchar" and t.full_str() == "varchar(10)"
    t = parse("char(3) binary character set latin1")
    assert (t.name, t.effective_collate) == ("char", "latin1_bin")
    assert parse("text binary").name == "text"
    # an explicit collation wins over BINARY
    assert parse("varchar(3) binary collate utf8mb4_general_ci").effective_collate == "utf8mb4_general_ci"
    assert parse("enum('a') binary").effective_collate == "utf8mb4_bin"


@pytest.mark.parametrize(("text", "name"), [
    # TEXT(M) / BLOB(M) become the smallest type holding M characters of the column's charset, as TiDB's
    # adjustBlobTypesFlen does (utf8mb4: 4 bytes a character, latin1 and binary: 1)
    ("text(63)", "tinytext"), ("text(64)", "text"), ("text(16383)", "text"), ("text(16384)", "mediumtext"),
    ("text(4194304)", "longtext"), ("text(255) charset latin1", "tinytext"), ("text(256) charset latin1", "text"),
    ("text(85) character set utf8", "tinytext"), ("text(86) charset utf8", "text"),
    ("blob(255)", "tinyblob"), ("blob(256)", "blob"),
    ("blob(65536)", "mediumblob"), ("blob(16777216)", "longblob"), ("text(10) charset binary", "tinyblob"),
    ("tinytext", "tinytext"), ("text", "text"), ("mediumblob", "mediumblob"),
])
def test_text_and_blob_lengths_pick_the_type(text, name):
    t = parse(text)
    assert t.name == name
    assert t.full_str() == name and t.short_str() == name
    assert t.display_length == parse(name).display_length


# =================================================================================================
# ENUM / SET elements
# =================================================================================================


@pytest.mark.parametrize(("text", "elements"), [
    ("enum('a','b','c')", ("a", "b", "c")),
    ("ENUM ( 'a' , 'b' )", ("a", "b")),
    ('enum("x","y")', ("x", "y")),
    ("enum('it''s','x')", ("it's", "x")),  # doubled quote
    ("enum('it\\'s')", ("it's",)),  # backslash-escaped quote
    ('enum("say ""hi""")', ('say "hi"',)),
    ("enum('a\"b')", ('a"b',)),
    ("enum('back\\\\slash')", ("back\\slash",)),  # \\ is one backslash
    # MySQL keeps the backslash of \% and \_
    ("enum('tab\\there','nl\\nx','nul\\0','cz\\Z','q\\%')", ("tab\there", "nl\nx", "nul\0", "cz\x1a", "q\\%")),
    ("enum('a,b','c')", ("a,b", "c")),  # a comma inside an element
    ("enum('(x)',')','(')", ("(x)", ")", "(")),  # parentheses inside elements
    ("enum('')", ("",)),
    ("enum(' padded ','é','😀')", (" padded", "é", "😀")),  # a trailing space is stripped, a leading one kept
    ("set('a','b','c')", ("a", "b", "c")),
    ("set('x''y','(z)')", ("x'y", "(z)")),
    ("enum", ()),  # canal-json's short mysqlType: the elements are unknown
    ("set", ()),
])
def test_enum_set_elements(text, elements):
    assert parse(text).elements == elements


def test_enum_set_type_strings():
    t = parse("enum('a','b','c') character set utf8mb4")
    assert (t.short_str(), t.full_str()) == ("enum", "enum('a','b','c')")
    assert parse("set('a','b')").full_str() == "set('a','b')"
    # TiDB's CompactStr writes elements through format.OutputFormat: ' -> '', NUL/newline/CR -> \0 \n \r,
    # and a backslash as it is (not doubled)
    t = parse("enum('it''s','a\\nb','c\\rd','n\\0','back\\\\slash','x,y')")
    assert t.full_str() == "enum('it''s','a\\nb','c\\rd','n\\0','back\\slash','x,y')"
    # so everything but a backslash reads back to the same elements
    t = parse("enum('it''s','a\\nb','c\\rd','n\\0','(p)','x,y','\"')")
    assert parse(t.full_str()).elements == t.elements


# =================================================================================================
# Bad input: TypeParseError with a readable message naming the input
# =================================================================================================


@pytest.mark.parametrize(("text", "why"), [
    ("", "cannot parse"),
    ("   ", "cannot parse"),
    ("(11)", "cannot parse"),
    ("integerx", "unknown column type"),
    ("varchar2(10)", "unknown column type"),
    ("int(", "missing ')'"),
    ("varchar(10", "missing ')'"),
    ("int(abc)", "bad length"),
    ("decimal(10,x)", "bad length"),
    ("int(1,2,3)", "too many parameters"),
    ("enum('a", "unterminated quoted string"),
    ("enum('a','b)", "unterminated quoted string"),
    ("enum(a,b)", "expected a quoted string"),
    ("int unsigned garbage", "unexpected attribute"),
    ("int(11) unsigned, x int", "unexpected"),
    ("int) ", "unexpected"),
    ("varchar(10) character utf8", "expected SET after CHARACTER"),
    ("varchar(10) character set", "missing charset name"),
    ("varchar(10) collate", "missing collation name"),
    ("decimal(66)", "decimal precision 66 out of range"),
    ("decimal(0)", "decimal precision 0 out of range"),
    ("decimal(10,31)", "decimal scale 31 out of range"),
    ("decimal(5,6)", "decimal scale 6 out of range"),
    ("float(54)", "float precision 54 out of range"),
    ("bit(0)", "bit length 0 out of range"),
    ("bit(65)", "bit length 65 out of range"),
    ("datetime(7)", "fractional seconds precision"),
    ("time(-1)", "fractional seconds precision"),
    ("timestamp(3,1)", "fractional seconds precision"),
    ("text unsigned", "UNSIGNED does not apply"),
])
def test_bad_types_raise_readable_errors(text, why):
    with pytest.raises(TypeParseError) as exc:
        parse(text)
    msg = str(exc.value)
    assert why in msg
    assert repr(text) in msg  # the message quotes the whole input
    assert isinstance(exc.value, ValueError)


def test_parse_is_cached_and_values_are_immutable():
    a, b = parse("int(11) unsigned"), parse("int(11) unsigned")
    assert a is b
    assert a == ColumnType("int", flen=11, unsigned=True)
    with pytest.raises(AttributeError):
        a.flen = 3  # type: ignore[misc]


# =================================================================================================
# Display length and scale defaults (TiDB's mysql.GetDefaultFieldLengthAndDecimal)
# =================================================================================================


@pytest.mark.parametrize(("text", "flen"), [
    ("tinyint", 4), ("tinyint unsigned", 3),
    ("smallint", 6), ("smallint unsigned", 5),
    ("mediumint", 9), ("mediumint unsigned", 8),
    ("int", 11), ("int unsigned", 10),
    ("bigint", 20), ("bigint unsigned", 20),  # TiDB: both 20
    ("bool", 1), ("tinyint(1) unsigned", 1), ("int(3) zerofill", 3),
    ("decimal", 10), ("decimal(12,6)", 12),
    ("bit", 1), ("bit(10)", 10),
    ("year", 4),
    ("char", 1), ("char(16)", 16), ("binary", 1), ("varchar", 5),
    ("date", 10), ("datetime", 19), ("timestamp", 19), ("time", 10),
    ("float", 12), ("double", 22),
    ("text", 65535), ("tinyblob", 255), ("mediumtext", 16777215), ("longblob", 4294967295),
    ("json", 4294967295),
    ("enum('a')", UNSPECIFIED),
])
def test_display_length_defaults(text, flen):
    assert parse(text).display_length == flen


def test_scale_and_fsp_defaults():
    assert parse("decimal").scale == 0 and parse("decimal(10)").scale == 0 and parse("decimal(9,3)").scale == 3
    assert parse("float").scale == UNSPECIFIED and parse("float(7,2)").scale == 2
    assert [parse(t).fsp for t in ("datetime", "datetime(0)", "datetime(3)", "timestamp(6)", "time(1)")] == \
        [0, 0, 3, 6, 1]
    assert parse("decimal(9,3)").fsp == 0  # fsp is for time types only
    assert parse("int").int_range() == (-(1 << 31), (1 << 31) - 1)


# =================================================================================================
# short_str (canal-json mysqlType) and full_str (content-compatible mysqlType)
# =================================================================================================


@pytest.mark.parametrize(("text", "short", "full"), [
    ("int", "int", "int(11)"),
    ("int(11)", "int", "int(11)"),
    ("int unsigned", "int unsigned", "int(10) unsigned"),
    ("tinyint unsigned", "tinyint unsigned", "tinyint(3) unsigned"),
    ("tinyint(1)", "tinyint", "tinyint(1)"),
    ("bool", "tinyint", "tinyint(1)"),
    ("smallint zerofill", "smallint unsigned zerofill", "smallint(5) unsigned zerofill"),
    ("mediumint(8) unsigned", "mediumint unsigned", "mediumint(8) unsigned"),
    ("bigint unsigned", "bigint unsigned", "bigint(20) unsigned"),
    ("serial", "bigint unsigned", "bigint(20) unsigned"),
    ("decimal", "decimal", "decimal(10,0)"),
    ("decimal(12,6)", "decimal", "decimal(12,6)"),
    ("decimal(10, 4)", "decimal", "decimal(10,4)"),
    ("decimal(7)", "decimal", "decimal(7,0)"),
    ("decimal(10,2) unsigned", "decimal unsigned", "decimal(10,2) unsigned"),
    ("float", "float", "float"),
    ("float(10,3)", "float", "float(10,3)"),
    ("float(30)", "double", "double"),
    ("double(12,0)", "double", "double"),  # a zero scale is TiDB's default: hidden
    ("double unsigned", "double unsigned", "double unsigned"),
    ("date", "date", "date"),
    ("datetime", "datetime", "datetime"),
    ("datetime(0)", "datetime", "datetime"),
    ("datetime(6)", "datetime", "datetime(6)"),
    ("timestamp(6)", "timestamp", "timestamp(6)"),
    ("time(3)", "time", "time(3)"),
    ("year", "year", "year(4)"),
    ("year(4) unsigned", "year", "year(4)"),
    ("bit", "bit", "bit(1)"),
    ("bit(10)", "bit", "bit(10)"),
    ("bit(64) unsigned", "bit", "bit(64)"),
    ("char", "char", "char(1)"),
    ("char(16)", "char", "char(16)"),
    ("varchar(16)", "varchar", "varchar(16)"),
    ("binary(16)", "binary", "binary(16)"),
    ("varbinary(16)", "varbinary", "varbinary(16)"),
    ("char(16) character set binary", "binary", "binary(16)"),
    ("tinytext", "tinytext", "tinytext"),
    ("text(100)", "text", "text"),
    ("longtext", "longtext", "longtext"),
    ("blob", "blob", "blob"),
    ("mediumblob", "mediumblob", "mediumblob"),
    ("json", "json", "json"),
    ("enum('a','b','c')", "enum", "enum('a','b','c')"),
    ("set('a','b','c')", "set", "set('a','b','c')"),
])
def test_short_and_full_strings(text, short, full):
    t = parse(text)
    assert t.short_str() == short
    assert t.full_str() == full
    # both read back as the same type name and flags (the decoder's job)
    for s in (short, full):
        back = parse(s)
        assert (back.name, back.unsigned, back.zerofill) == (t.name, t.unsigned, t.zerofill)
    assert parse(full).full_str() == full


# =================================================================================================
# Normalizers: integers
# =================================================================================================

INT_BOUNDS = [
    ("tinyint", -128, 127), ("tinyint unsigned", 0, 255),
    ("smallint", -32768, 32767), ("smallint unsigned", 0, 65535),
    ("mediumint", -8388608, 8388607), ("mediumint unsigned", 0, 16777215),
    ("int", -2147483648, 2147483647), ("int unsigned", 0, 4294967295),
    ("bigint", I64_MIN, I64_MAX), ("bigint unsigned", 0, U64_MAX),
]


@pytest.mark.parametrize(("text", "lo", "hi"), INT_BOUNDS)
def test_int_ranges(text, lo, hi):
    n = norm(text)
    for v in (lo, hi, 0, lo + 1, hi - 1):
        assert n(v) == v and type(n(v)) is int
        assert n({"$int": str(v)}) == v  # the event-line form for integers beyond JSON's safe range
        assert n(str(v)) == v
    assert n(None) is None
    for bad in (lo - 1, hi + 1, {"$int": str(hi + 1)}, str(lo - 1)):
        with pytest.raises(ValueError_, match=f"out of range {lo}..{hi}"):
            n(bad)


def test_int_extremes():
    u = norm("bigint unsigned")
    assert u(U64_MAX) == 18446744073709551615
    assert u({"$int": "18446744073709551615"}) == U64_MAX
    assert norm("bigint")({"$int": "-9223372036854775808"}) == I64_MIN
    with pytest.raises(ValueError_, match="out of range"):
        u(1 << 64)
    with pytest.raises(ValueError_, match="out of range"):
        norm("bigint")({"$int": "-9223372036854775809"})
    with pytest.raises(ValueError_, match="out of range"):
        u(-1)


def test_int_accepted_and_rejected_forms():
    n = norm("int")
    assert n(True) == 1 and n(False) == 0
    assert n(7.0) == 7 and type(n(7.0)) is int
    assert n(" 42 ") == 42
    for bad in (1.5, "1.5", "0x10", "", "abc", [1], {"x": 1}, {"$int": "1e3"}, float("nan")):
        with pytest.raises(ValueError_) as exc:
            n(bad)
        assert "not a valid int(11) value" in str(exc.value)
        assert "not an integer" in str(exc.value)


def test_int_error_message_is_readable():
    with pytest.raises(ValueError_) as exc:
        norm("tinyint unsigned")(256)
    assert str(exc.value) == "256 is not a valid tinyint(3) unsigned value: out of range 0..255"


# =================================================================================================
# Normalizers: FLOAT / DOUBLE
# =================================================================================================


def test_float32_values_are_canonical():
    n = norm("float")
    # a FLOAT column holds a float32; it is kept as the float64 of its shortest text, so 3.14 stays 3.14
    assert n(3.14) == 3.14 and n("3.14") == 3.14
    assert n(2.71) == 2.71 and n(0.1) == 0.1
    assert n(3.140000104904175) == 3.14  # the float32 nearest 3.14, as a float64
    assert n(16777217) == 16777216.0  # 2^24 + 1 is not a float32
    assert n(1e-50) == 0.0  # underflows
    assert n(3.4028234663852886e38) == float("340282350000000000000000000000000000000")
    assert to_float32(n(3.4028234663852886e38)) == 3.4028234663852886e38
    assert math.copysign(1, n(-0.0)) == -1
    assert n(10) == 10.0 and type(n(10)) is float
    assert n(None) is None


def test_nan_and_inf_become_zero_as_in_ticdcs_mounter():
    for text in ("float", "double"):
        n = norm(text)
        for v in (float("nan"), float("inf"), float("-inf"), "nan", "inf", "-Infinity", "1e400"):
            assert n(v) == 0.0, (text, v)


def test_float_rejects():
    with pytest.raises(ValueError_, match="out of range for FLOAT"):
        norm("float")(3.5e38)
    for text in ("float", "double"):  # an int no double holds: a readable error, not OverflowError
        with pytest.raises(ValueError_, match="out of range"):
            norm(text)(10**400)
    for text in ("float", "double"):
        for bad in ("abc", "", True, [1.0], {"$int": "1"}, b"1"):
            with pytest.raises(ValueError_, match="not a number"):
                norm(text)(bad)


def test_double_values_are_exact():
    n = norm("double")
    for v in (0.1, 1e308, 5e-324, -1.7976931348623157e308, 0.30000000000000004, 123456789012345680000.0):
        assert n(v) == v
    assert n("1.5") == 1.5 and n(3) == 3.0


# =================================================================================================
# Normalizers: DECIMAL (text kept exactly, scale included)
# =================================================================================================


def test_decimal_text_is_kept_exactly():
    n = norm("decimal(65,30)")
    for text in ("129012.1230000", "-0.000000000000000000000000000001", "0", "-99999999999999999999999999999999999."
                 "999999999999999999999999999999", "123.4560", "1.", ".5", "+1"):
        assert n(text) == text
    assert n(12) == "12"
    assert n(I64_MIN) == "-9223372036854775808"
    assert n(1.5) == "1.5" and n(1e21) == "1000000000000000000000"  # a float through Go's 'f' formatting
    assert n(None) is None
    for bad in ("1e5", "abc", "", " 1", "1,5", "--1", "1.2.3", True, [1]):
        with pytest.raises(ValueError_, match="decimal values are strings of digits"):
            n(bad)


# =================================================================================================
# Normalizers: DATE / DATETIME / TIMESTAMP / TIME / YEAR
# =================================================================================================


def test_date_formats():
    n = norm("date")
    for v in ("2020-02-29", "1000-01-01", "9999-12-31", "0000-00-00", "2020-00-00", "2020-12-31"):
        assert n(v) == v
    for bad in ("2020-13-01", "2020-12-32", "2020-1-1", "20200101", "2020-01-01 00:00:00", "2020/01/01", "",
                " 2020-01-01", "2020-01-01\n", 20200101):
        with pytest.raises(ValueError_, match="expected YYYY-MM-DD"):
            n(bad)


@pytest.mark.parametrize(("text", "frac"), [("datetime", ""), ("datetime(6)", ".461270"), ("timestamp", ""),
                                           ("timestamp(3)", ".123")])
def test_datetime_formats(text, frac):
    n = norm(text)
    # TiDB's time strings carry exactly fsp fraction digits
    for v in ("2020-02-20 02:20:20", "1970-01-01 00:00:01", "9999-12-31 23:59:59", "0000-00-00 00:00:00",
              "2020-02-29 00:00:00"):
        assert n(v + frac) == v + frac
    # ISO 'T' is accepted and written as TiDB does, with a space
    assert n("2020-02-20T02:20:20" + frac) == "2020-02-20 02:20:20" + frac
    for bad in ("2020-02-20 24:00:00", "2020-02-20 02:60:00", "2020-02-20 02:00:60", "2020-13-20 00:00:00",
                "2020-02-20", "2020-02-20 2:20:20", "2020-02-20 02:20:20.", "2020-02-20 02:20:20Z", "", 0):
        with pytest.raises(ValueError_, match=r"expected YYYY-MM-DD HH:MM:SS\[\.ffffff\]"):
            n(bad)


def test_time_formats():
    n = norm("time(6)")
    for v in ("-838:59:59.000000", "838:59:59", "-838:59:59", "00:00:00", "-00:00:01", "12:34:56.123456",
              "-12:34:56.123456", "100:00:00", "24:00:00", "5:06:07"):
        assert n(v) == v
    for bad in ("839:00:00", "-839:00:00", "999:00:00", "12:60:00", "12:00:60", "1:2:3", "12:00", "", " 12:00:00",
                "+12:00:00", "12:00:00.", "1 12:00:00", 43200):
        with pytest.raises(ValueError_, match="within ±838:59:59"):
            n(bad)


def test_year_range():
    n = norm("year")
    for v in (0, 1901, 2155, 2000):
        assert n(v) == v
    assert n("2020") == 2020 and n({"$int": "1999"}) == 1999
    for bad in (1, 99, 1900, 2156, -1, 10000):
        with pytest.raises(ValueError_, match="YEAR is 0 or 1901..2155"):
            n(bad)


# =================================================================================================
# Normalizers: strings, binary, JSON
# =================================================================================================


def test_text_values():
    n = norm("varchar(10)")
    for v in ("", "abc", "\x00\x01\x1f\x7f", "<&>", "\u2028\u2029", "😀é中"):
        assert n(v) == v
    assert n({"$b64": "w6k="}) == "é"
    with pytest.raises(ValueError_, match="not UTF-8 text"):
        n({"$b64": "/w=="})
    with pytest.raises(ValueError_, match="invalid base64"):
        n({"$b64": "!!"})
    for bad in (5, 1.5, True, ["a"], {"k": "v"}):
        with pytest.raises(ValueError_, match="expected a string"):
            n(bad)


def test_binary_values_and_padding():
    n = norm("binary(4)")
    assert n({"$b64": "YQ=="}) == b"a\0\0\0"  # binary(N) is right-padded with 0x00 to N bytes
    assert n({"$b64": ""}) == b"\0\0\0\0"
    assert n("ab") == b"ab\0\0"  # a plain string is taken as its UTF-8 bytes
    assert n(b"abcd") == b"abcd"
    # a bare `binary` is canal-json's short mysqlType for any binary(N): no padding, no limit
    assert norm("binary")(b"") == b"" and norm("binary")(b"x" * 16) == b"x" * 16
    with pytest.raises(ValueError_, match="longer than 4"):
        n(b"abcde")
    with pytest.raises(ValueError_, match="longer than 2"):
        norm("varbinary(2)")(b"abc")
    vb = norm("varbinary(4)")
    assert vb({"$b64": "YQ=="}) == b"a" and vb("") == b"" and vb(bytearray(b"\x00\xff")) == b"\x00\xff"
    all_bytes = bytes(range(256))
    import base64

    assert norm("blob")({"$b64": base64.b64encode(all_bytes).decode()}) == all_bytes
    with pytest.raises(ValueError_, match="invalid base64"):
        vb({"$b64": "YQ"})
    with pytest.raises(ValueError_, match=r'binary values are \{"\$b64": \.\.\.\}'):
        vb(5)


def test_json_values_become_tidb_canonical_text():
    n = norm("json")
    assert n({"k": "v"}) == '{"k": "v"}'
    assert n([1, 2]) == "[1, 2]"
    assert n({"a": {"b": [1, "x", None, True, False]}}) == '{"a": {"b": [1, "x", null, true, false]}}'
    assert n({}) == "{}" and n([]) == "[]"
    # TiDB keeps object keys sorted by their UTF-8 bytes (appendBinaryObject), whatever the input order
    assert n({"z": 1, "a": 2, "é": 3, "B": 4}) == '{"B": 4, "a": 2, "z": 1, "é": 3}'
    # numbers as TiDB's marshalFloat64To (pkg/types/json_binary.go) writes them: Go's shortest 'f' text, and ".0"
    # after an integral one (MariaDB's -15000000000.0 is not the integer); MySQL's exponent range outside
    # [1e-15, 1e15), Go's 'e' text without the exponent's '+' (e-09 cannot occur there)
    assert n(1.5) == "1.5" and n(1.0) == "1.0" and n(-0.0) == "-0.0" and n(-15000000000.0) == "-15000000000.0"
    assert n(-15000000000) == "-15000000000" and n([1, 1.0]) == "[1, 1.0]"
    assert n(1e21) == "1e21" and n(1.5e-7) == "0.00000015" and n(1e-6) == "0.000001"
    assert n(1e15) == "1e15" and n(999999999999999.0) == "999999999999999.0" and n(-2.5e300) == "-2.5e300"
    assert n(1e-15) == "0.000000000000001" and n(1e-16) == "1e-16" and n(-1.5e-20) == "-1.5e-20"
    assert n(U64_MAX) == "18446744073709551615" and n(I64_MIN) == "-9223372036854775808"
    assert n(1 << 64) == "1.8446744073709552e19"  # beyond uint64 TiDB reads a double
    # strings as TiDB's jsonMarshalStringTo: <>& raw, \b \f as \u00XX, U+2028/9 escaped
    assert n({"k": "<&>\b\f\n\t\x01\u2028\u2029😀"}) == '{"k": "<&>\\u0008\\u000c\\n\\t\\u0001\\u2028\\u2029😀"}'
    assert n({"k": "a\\b\"c"}) == '{"k": "a\\\\b\\"c"}'
    assert n(True) == "true" and n(7) == "7"
    # a JSON string value is the document's text already; $b64 is its UTF-8 bytes
    assert n('{"k":"v"}') == '{"k":"v"}'
    assert n({"$b64": "e30="}) == "{}"
    assert tidb_json_text(None) == "null"
    with pytest.raises(ValueError_, match="not a JSON number"):
        tidb_json_text(float("nan"))
    with pytest.raises(ValueError_, match="out of range for a JSON number"):
        n({"k": 10**400})


# =================================================================================================
# Normalizers: ENUM / SET / BIT
# =================================================================================================


def test_enum_names_and_indexes():
    n = norm("enum('a','B','c''d')")
    assert [n(v) for v in ("a", "B", "c'd")] == [1, 2, 3]
    assert n("") == 0  # MySQL's error value ''
    assert n("b") == 2 and n("A") == 1 and n("C'D") == 3  # names match case-insensitively
    assert n(0) == 0 and n(3) == 3 and n({"$int": "2"}) == 2
    assert n(None) is None
    for bad in (4, -1):
        with pytest.raises(ValueError_, match="enum index out of range"):
            n(bad)
    with pytest.raises(ValueError_, match=r"not one of \['a', 'B', \"c'd\"\]"):
        n("d")
    with pytest.raises(ValueError_, match="not one of"):
        n("2")  # with the elements known, a string is a name
    # and back: index -> name
    out = make_json_out(parse("enum('a','B','c''d')"))
    assert [out(i) for i in (0, 1, 2, 3)] == ["", "a", "B", "c'd"]
    assert out(None) is None


def test_enum_with_unknown_elements_keeps_indexes():
    n = norm("enum")
    assert n(7) == 7 and n("5") == 5 and n("") == 0
    with pytest.raises(ValueError_, match="not one of"):
        n("a")
    assert make_json_out(parse("enum"))(7) == 7


def test_enum_with_an_empty_element_is_ambiguous_by_name():
    # MySQL allows '' as an element; by name it cannot be told from the error value '' (index 0), so the
    # event-line form (names) reads it back as 0, as a name-based reader of MySQL output would
    t = parse("enum('','a')")
    assert make_json_out(t)(1) == "" and make_normalizer(t)("") == 0


def test_set_names_and_bitmasks():
    n = norm("set('a','b','c')")
    assert n("a") == 1 and n("a,b") == 3 and n("b,a") == 3 and n("a,b,c") == 7 and n("c") == 4
    assert n("") == 0
    assert n("A,C") == 5  # case-insensitive
    assert n("a,a") == 1
    assert n(7) == 7 and n(0) == 0 and n({"$int": "5"}) == 5
    with pytest.raises(ValueError_, match="set bitmask out of range"):
        n(8)
    with pytest.raises(ValueError_, match="set bitmask out of range"):
        n(-1)
    with pytest.raises(ValueError_, match="'d' is not one of"):
        n("a,d")
    with pytest.raises(ValueError_, match="' b' is not one of"):
        n("a, b")
    out = make_json_out(parse("set('a','b','c')"))
    assert [out(v) for v in (0, 1, 3, 5, 7)] == ["", "a", "a,b", "a,c", "a,b,c"]


def test_set_with_unknown_elements_and_64_members():
    n = norm("set")
    assert n(5) == 5 and n("3") == 3 and n(U64_MAX) == U64_MAX
    elements = ",".join(f"'e{i}'" for i in range(64))
    n64 = norm(f"set({elements})")
    assert n64(U64_MAX) == U64_MAX
    assert n64(",".join(f"e{i}" for i in range(64))) == U64_MAX
    with pytest.raises(ValueError_, match="out of range"):
        n64(1 << 64)


@pytest.mark.parametrize("width", [1, 2, 7, 8, 9, 31, 32, 63, 64])
def test_bit_range_by_width(width):
    n = norm(f"bit({width})")
    top = (1 << width) - 1
    assert n(0) == 0 and n(top) == top and n(str(top)) == top
    # {"$b64"}: the stored big-endian bytes
    import base64

    raw = top.to_bytes((width + 7) // 8, "big")
    assert n({"$b64": base64.b64encode(raw).decode()}) == top
    with pytest.raises(ValueError_, match=rf"out of range for bit\({width}\)"):
        n(top + 1)
    with pytest.raises(ValueError_, match="out of range"):
        n(-1)
    assert norm("bit")(1) == 1  # bare bit is bit(1)
    with pytest.raises(ValueError_, match=r"out of range for bit\(1\)"):
        norm("bit")(2)


# =================================================================================================
# Go's strconv.FormatFloat(v, 'f', -1, 64/32), against Go's own output
# =================================================================================================


def _f64(bits_hex: str) -> float:
    return struct.unpack(">d", bytes.fromhex(bits_hex))[0]


def _go_id(e: dict) -> str:
    return e["input"] + (f" ({e['note']})" if e.get("note") else "")


# Go 1.26 formats shortest floats by Dragonbox (golang/go#75195); dboxFtoa32 checks the float64 tie exponent
# (`exp == -77`, internal/strconv/ftoadbox.go) where the float32 one is -35, so for the single float32
# 2^-12 = 0.000244140625 it rounds the exact tie between the two 8-digit candidates up. The Dragonbox
# reference and Go's earlier Ryu code (ryuFtoaShortest: an exact tie goes to even), which TiCDC releases are
# built with, give the even one. Both strings read back as the same float32; we write the even one.
GO126_FLOAT32_TIE = {"0.000244140625": ("0.00024414063", "0.00024414062")}


def test_golden_file_is_go_output():
    assert GO_FLOATS["go_version"].startswith("go1.")
    assert len(GO_FLOATS["float64"]) >= 40 and len(GO_FLOATS["float32"]) >= 40
    for e in GO_FLOATS["float64"] + GO_FLOATS["float32"]:
        assert float(e["input"]) == _f64(e["bits"])


@pytest.mark.parametrize("entry", GO_FLOATS["float64"], ids=_go_id)
def test_go_format_float64_matches_go(entry):
    v = _f64(entry["bits"])
    assert go_format_float64(v) == entry["format"]


@pytest.mark.parametrize("entry", GO_FLOATS["float32"], ids=_go_id)
def test_shortest_float32_matches_go(entry):
    v = _f64(entry["bits"])
    f = to_float32(v)
    got = shortest_float32(v)
    key = repr(abs(f))
    if key in GO126_FLOAT32_TIE:
        go, ours = GO126_FLOAT32_TIE[key]
        assert entry["format"].lstrip("-") == go
        assert got.lstrip("-") == ours
        assert to_float32(float(go)) == to_float32(float(ours)) == abs(f)
        return
    assert got == entry["format"]
    # and it is what a FLOAT column keeps
    if f == f and not math.isinf(f):
        assert canonical_float32(v) == float(entry["format"])


def test_float_formatting_of_special_values():
    # Go prints NaN/+Inf; the mounter has replaced them by 0 before any encoder formats them
    for v in (float("nan"), float("inf"), float("-inf")):
        assert go_format_float64(v) == "0"
        assert shortest_float32(v) == "0"
    # 0.0 and -0.0 are equal keys to a cache: each keeps its own sign
    assert [shortest_float32(x) for x in (0.0, -0.0, 0.0, -0.0)] == ["0", "-0", "0", "-0"]
    assert [go_format_float64(x) for x in (0.0, -0.0)] == ["0", "-0"]
    # float32 max and min subnormal, which once broke the shortest-digits search
    assert shortest_float32(3.4028234663852886e38) == "340282350000000000000000000000000000000"
    assert shortest_float32(-3.4028234663852886e38) == "-340282350000000000000000000000000000000"
    assert shortest_float32(1e-45) == "0." + "0" * 44 + "1"
    # a decimal read through float64 first rounds twice; the shortest text must read back as this float32
    assert shortest_float32(7.038531e-26) == "0.000000000000000000000000070385313"


def test_float32_fast_path_agrees_with_the_exact_search(monkeypatch):
    import random

    from changefeed.mysqltypes import gotext

    rng = random.Random(38)
    bits = [rng.getrandbits(32) for _ in range(4000)] + [0x00800001, 0x7F7FFFFE, 0x3F800001, 0x4B7FFFFF]
    values = [struct.unpack("<f", struct.pack("<I", b))[0] for b in bits]
    values += [round(rng.uniform(-1e6, 1e6), 3) for _ in range(4000)]
    cases = [to_float32(v) for v in values if math.isfinite(v) and v != 0 and math.isfinite(to_float32(v))]
    fast = {f: gotext._shortest_float32_fast(f) for f in cases}
    assert sum(v is not None for v in fast.values()) > len(cases) * 0.9  # the fast path is the common one
    monkeypatch.setattr(gotext, "_shortest_float32_fast", lambda f: None)
    for f, text in fast.items():
        if text is not None:
            assert text == gotext._shortest_float32.__wrapped__(f), f


def test_a_vectors_dimension_is_kept():
    """TiDB keeps VECTOR(D)'s dimension as the flen and CompactStr writes it back (`vector(5)`: canal-json's
    content-compatible mysqlType, the simple protocol's `length`); the short form is the bare name."""
    t = parse("VECTOR(5)")
    assert (t.short_str(), t.compact_str(), t.full_str(), t.display_length) == ("vector", "vector(5)", "vector(5)", 5)
    assert parse("vector").compact_str() == "vector"


def test_enum_and_set_members_lose_their_trailing_spaces():
    """MySQL ("trailing spaces are automatically deleted from ENUM member values") and TiDB's parser strip them:
    the members, and the length TiDB derives from them, are those of the stripped text."""
    from changefeed.simple.schema import data_type

    e = ColumnType.parse("enum('x  ','y')")
    s = ColumnType.parse("set('x  ',' y')")
    assert e.elements == ("x", "y") and s.elements == ("x", " y")
    assert data_type(e)["length"] == 1 and data_type(s)["length"] == 4
