"""Secrets kept out of sight: one redaction for every text changefeed prints or stores.

A secret reaches text three ways: a URI's user-info (`kafka://user:pw@host`, `https://user:pw@registry`), an
option whose name says it is one (`sasl-password=...`, `sasl-oauth-client-secret=...`, `password="..."` in a
JAAS line, `'sasl.password': '...'` in a dict's repr), or its bare value inside another tool's message. The
first two are matched by shape; values are remembered (`remember`) when the options are read, and every
occurrence of one is masked wherever it turns up.
"""

from __future__ import annotations

import io
import re
from typing import Any, TextIO

MASK = "***"
# a name that says its value is secret: sasl-password, sasl-oauth-client-secret, sasl.jaas.config's password,
# ssl.key.password, clientSecret, ...
_NAME = r"[\w.-]*(?:password|passwd|secret|jaas\.config)[\w.-]*"
_NAMED = re.compile(r"(?i)(\b" + _NAME + r"[\"']?\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^&\s,;\"'})\]]+)")
_USERINFO = re.compile(r"(?i)\b([a-z][\w+.-]*://[^/\s:@?#]*):[^@/\s?#]*@")
_PEM_KEY = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)", re.S)
_VALUES: set[str] = set()


def is_secret_name(name: str) -> bool:
    """Whether an option's value is a secret (by its name, as TiCDC and Kafka spell them)."""
    return re.fullmatch(r"(?i)" + _NAME, name) is not None


def remember(value: str | None) -> None:
    """A secret value to mask wherever it appears (too short a value would mask ordinary words)."""
    if value and len(value) >= 4:
        _VALUES.add(value)


def remember_options(options: dict[str, str]) -> None:
    """Remember the values of the secret-named options of a URI or a config."""
    for k, v in options.items():
        if is_secret_name(k):
            remember(v)


def redact(text: str) -> str:
    """The text as it may be printed or stored: user-info passwords, secret-named options, private keys and every
    remembered secret value masked."""
    if not text:
        return text
    out = _USERINFO.sub(lambda m: f"{m.group(1)}:{MASK}@", text)

    def named(m: re.Match[str]) -> str:
        v = m.group(2)
        q = v[0] if v[:1] in "\"'" else ""
        return f"{m.group(1)}{q}{MASK}{q}"
    out = _NAMED.sub(named, out)
    out = _PEM_KEY.sub(f"-----{MASK} PRIVATE KEY-----", out)
    for v in sorted(_VALUES, key=len, reverse=True):
        if v in out:
            out = out.replace(v, MASK)
    return out


class RedactingStream(io.TextIOBase):
    """A text stream that redacts what is written through it (the CLI's stdout and stderr: errors, warnings,
    logs, `--debug` tracebacks)."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner

    def write(self, s: str) -> int:  # type: ignore[override]
        self.inner.write(redact(s))
        return len(s)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.inner.encoding

    @property
    def buffer(self) -> Any:
        return self.inner.buffer  # binary output (event lines) is data, written as it is

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
