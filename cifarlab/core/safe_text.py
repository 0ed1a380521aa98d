"""Text that came from a user made safe for where it is written: one line of a comment or
message, Markdown, a code span, a CSV cell (never a formula)."""
from __future__ import annotations

import csv
import re
from typing import Any

# Every ASCII character that means something in Markdown (CommonMark, GitHub's tables and
# strikethrough, Jupyter's $math$, Streamlit's :colour[...] and :icon:): a backslash before
# any ASCII punctuation shows the character itself, and escaping < and & keeps out HTML.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:^=&])")
# What GitHub-flavoured Markdown (Streamlit's) turns into a link with no markup at all: a bare
# "https://", "www." or e-mail address; a zero-width space inside each keeps it text.
_AUTOLINK = re.compile(r"(?i)(://|www(?=\\\.)|@)")
# What a spreadsheet may read as the start of a formula (OWASP, CSV injection); a leading
# apostrophe is escaped too, so that csv_value can undo csv_cell exactly.
_CSV_TRIGGERS = ("=", "+", "-", "@", "\t", "\r", "'")


def one_line(text: Any) -> str:
    """``text`` as one line of plain characters: every character that is not printable (line
    and paragraph breaks ``\\n \\r \\x0b \\x0c \\x1c-\\x1e \\x85 \\u2028 \\u2029``, other controls,
    bidi overrides, NUL) becomes a space, and runs of spaces become one."""
    return " ".join("".join(ch if ch.isprintable() else " " for ch in str(text)).split())


def md_escape(text: Any) -> str:
    """``text`` as literal characters in Markdown, on one line: no markup, link or HTML."""
    return _AUTOLINK.sub("\\1\u200b", _MD_SPECIAL.sub(r"\\\1", one_line(text)))


def code_text(text: Any) -> str:
    """``text`` for inside a Markdown code span (where a backslash shows as itself): on one
    line, a backtick, which would end the span, shown as a look-alike."""
    return one_line(text).replace("`", "\u02cb")


def csv_cell(value: Any) -> Any:
    """A CSV cell that a spreadsheet shows as text: a formula's start (or an apostrophe) gets a
    leading apostrophe; anything else is returned as it is."""
    if isinstance(value, str) and value.startswith(_CSV_TRIGGERS):
        return "'" + value
    return value


def csv_value(cell: Any) -> Any:
    """The value ``csv_cell`` was given, from the cell it wrote."""
    if isinstance(cell, str) and cell.startswith("'") and cell[1:].startswith(_CSV_TRIGGERS):
        return cell[1:]
    return cell


def csv_writer(out, **kwargs) -> _CellWriter:
    """``csv.writer(out, **kwargs)`` whose every cell goes through ``csv_cell``."""
    return _CellWriter(csv.writer(out, **kwargs))


class _CellWriter:
    def __init__(self, writer):
        self._writer = writer

    def writerow(self, row):
        return self._writer.writerow([csv_cell(v) for v in row])
