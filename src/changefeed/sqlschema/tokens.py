"""The SQL tokenizer and the cursor the DDL readers walk tokens with.

`_tokenize` splits a statement into tokens (quotes, comments, TiDB's `/*T![feature] ... */` and MySQL's
`/*!40101 ... */` versioned comments, whose content is read as SQL); `_P` is a cursor over them with
the keyword and punctuation tests every reader uses; `_render` puts tokens back as text.
"""

from __future__ import annotations

import functools
import re

from ..errors import UnsupportedSyntax
from ..mysqltypes import unquote_sql_string as _unquote


def _short(sql: str, limit: int = 160) -> str:
    s = " ".join(sql.split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


_TOKEN_TEXT = (
    r"""
      (?P<ws>\s+)
    | (?P<vopen>/\*(?:!\d*|[MT]!(?:\[[^\]]*\])?))
    | (?P<comment>/\*.*?\*/|--(?=\s|$)[^\n]*|\#[^\n]*)
    | (?P<vclose>\*/)
    | (?P<qid>`(?:[^`]|``)*`)
    | (?P<str>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
    | (?P<hex>0x[0-9a-fA-F]+(?![\w$])|[xX]'[0-9a-fA-F]*')
    | (?P<bit>0b[01]+(?![\w$])|[bB]'[01]*')
    | (?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?![\w$]))
    | (?P<id>[\w$]+)
    | (?P<op><=>|<=|>=|<>|!=|:=|\|\||&&|<<|>>|->>|->|.)
    """
)


@functools.cache
def _token_re() -> re.Pattern[str]:
    """The tokens' pattern, compiled when a statement is first read: compiling it is ~5 ms of the start of a
    command that may read none (`changefeed decode` of row messages)."""
    return re.compile(_TOKEN_TEXT, re.S | re.X)

class _Tok:
    __slots__ = ("kind", "text", "start", "end", "up")

    def __init__(self, kind: str, text: str, start: int, end: int) -> None:
        self.kind = kind
        self.text = text
        self.start = start
        self.end = end
        self.up = text.upper() if kind == "id" else ""

    def is_op(self, ch: str) -> bool:
        return self.kind == "op" and self.text == ch

    @property
    def value(self) -> str:
        """An identifier's or string's value: quotes removed."""
        if self.kind == "qid":
            return self.text[1:-1].replace("``", "`")
        if self.kind == "str":
            return _unquote(self.text)
        return self.text

    def __repr__(self) -> str:
        return f"<{self.kind} {self.text!r}>"


_EOF = _Tok("eof", "", -1, -1)


def _tokenize(sql: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    n = len(sql)
    versioned = 0
    match = _token_re().match
    while pos < n:
        m = match(sql, pos)
        assert m is not None  # the last alternative matches any character
        kind = m.lastgroup
        end = m.end()
        if kind == "vopen":
            versioned += 1
        elif kind == "vclose":
            if versioned:
                versioned -= 1
            else:
                toks.append(_Tok("op", "*", pos, pos + 1))
                toks.append(_Tok("op", "/", pos + 1, end))
        elif kind not in ("ws", "comment"):
            toks.append(_Tok(kind, m.group(), pos, end))  # type: ignore[arg-type]
        pos = end
    return toks


def _render(toks: list[_Tok], texts: list[str] | None = None) -> str:
    """Tokens back to text: as written, with any run of spaces or comments between two tokens as one space."""
    out: list[str] = []
    prev: _Tok | None = None
    for k, t in enumerate(toks):
        if prev is not None and t.start > prev.end:
            out.append(" ")
        out.append(texts[k] if texts is not None else t.text)
        prev = t
    return "".join(out)


def _split(toks: list[_Tok], sep: str = ",") -> list[list[_Tok]]:
    """Split on `sep` outside parentheses (empty parts dropped)."""
    parts: list[list[_Tok]] = []
    cur: list[_Tok] = []
    depth = 0
    for t in toks:
        if t.kind == "op":
            if t.text == "(":
                depth += 1
            elif t.text == ")":
                depth -= 1
            elif t.text == sep and depth == 0:
                if cur:
                    parts.append(cur)
                cur = []
                continue
        cur.append(t)
    if cur:
        parts.append(cur)
    return parts


class _P:
    """A cursor over a statement's tokens (or part of them)."""

    __slots__ = ("t", "i", "stmt")

    def __init__(self, toks: list[_Tok], stmt: str) -> None:
        self.t = toks
        self.i = 0
        self.stmt = stmt

    def err(self, msg: str) -> UnsupportedSyntax:
        return UnsupportedSyntax(f"{msg} in {self.stmt!r}")

    def peek(self, k: int = 0) -> _Tok:
        j = self.i + k
        return self.t[j] if j < len(self.t) else _EOF

    def at_end(self) -> bool:
        return self.i >= len(self.t)

    def next(self) -> _Tok:
        if self.i >= len(self.t):
            raise self.err("unexpected end of statement")
        tok = self.t[self.i]
        self.i += 1
        return tok

    def is_kw(self, *words: str, k: int = 0) -> bool:
        return self.peek(k).up in words

    def accept(self, *words: str) -> str | None:
        up = self.peek().up
        if up and up in words:
            self.i += 1
            return up
        return None

    def accept_seq(self, *words: str) -> bool:
        if all(self.peek(k).up == w for k, w in enumerate(words)):
            self.i += len(words)
            return True
        return False

    def expect(self, word: str) -> None:
        if not self.accept(word):
            raise self.err(f"expected {word}, found {self.peek().text or 'the end'!r}")

    def is_op(self, ch: str, k: int = 0) -> bool:
        return self.peek(k).is_op(ch)

    def accept_op(self, ch: str) -> bool:
        if self.peek().is_op(ch):
            self.i += 1
            return True
        return False

    def ident(self) -> str:
        tok = self.next()
        if tok.kind in ("id", "qid", "str"):
            return tok.value
        if tok.kind == "num":  # an unquoted name such as 123abc is an id; a bare number is not, but accept it
            return tok.text
        raise self.err(f"expected a name, found {tok.text!r}")

    def qname(self, default_schema: str) -> tuple[str, str]:
        first = self.ident()
        if self.accept_op("."):
            return first, self.ident()
        return default_schema, first

    def group(self) -> list[_Tok]:
        """Consume `( ... )` and return the tokens inside."""
        if not self.is_op("("):
            raise self.err(f"expected '(', found {self.peek().text or 'the end'!r}")
        start = self.i
        depth = 0
        while self.i < len(self.t):
            tok = self.t[self.i]
            self.i += 1
            if tok.kind == "op":
                if tok.text == "(":
                    depth += 1
                elif tok.text == ")":
                    depth -= 1
                    if depth == 0:
                        return self.t[start + 1 : self.i - 1]
        raise self.err("unbalanced parentheses")

    def rest(self) -> list[_Tok]:
        toks = self.t[self.i :]
        self.i = len(self.t)
        return toks


def _statements(sql: str) -> list[list[_Tok]]:
    return _split(_tokenize(sql), ";")
