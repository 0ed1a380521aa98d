"""Class codes (no vowels, no look-alike characters) and nicknames (no markup, no hidden
characters, none that looks like a classmate's)."""
from __future__ import annotations

import functools
import re
import secrets
import unicodedata
from typing import Any, Iterable

from cifarlab.serve.classroom.model import ClassError

CODE_ALPHABET = "34679CDFHJKMNPRTWX"
CODE_GROUP = 3
CODE_RE = re.compile(rf"[{CODE_ALPHABET}]{{{CODE_GROUP}}}-[{CODE_ALPHABET}]{{{CODE_GROUP}}}")
NICK_MAX = 24
TITLE_MAX = 80
_NICK_RE = re.compile(r"[^\W_][\w .-]*")


def new_code() -> str:
    chars = "".join(secrets.choice(CODE_ALPHABET) for _ in range(2 * CODE_GROUP))
    return f"{chars[:CODE_GROUP]}-{chars[CODE_GROUP:]}"


def normalize_code(code: Any) -> str | None:
    """What a student typed, as a code ("k7m 4px" -> "K7M-4PX"); None if it cannot be one (no
    lookup is made for it)."""
    if not isinstance(code, str) or len(code) > 40:
        return None
    compact = "".join(code.replace("_", " ").replace("-", " ").split()).upper()
    if len(compact) == 2 * CODE_GROUP and all(c in CODE_ALPHABET for c in compact):
        return f"{compact[:CODE_GROUP]}-{compact[CODE_GROUP:]}"
    return None


def clean_nickname(nickname: Any) -> str:
    """The nickname as stored (spaces collapsed, NFC), or ClassError naming what is wrong."""
    text = (" ".join(unicodedata.normalize("NFC", nickname).split())
            if isinstance(nickname, str) else "")
    hidden = invisible(text)
    if hidden is not None:
        raise ClassError("class.nickname_invisible", field="nickname", char=f"U+{ord(hidden):04X}")
    if not 0 < len(text) <= NICK_MAX:
        raise ClassError("class.nickname_length", field="nickname", n=NICK_MAX, got=len(text))
    if not _NICK_RE.fullmatch(text):
        raise ClassError("class.nickname_markup", field="nickname")
    return text


# Letters Unicode draws as nothing (default-ignorable, yet letters, so \w takes them).
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")


def invisible(text: str) -> str | None:
    """The first character of ``text`` that shows nothing or turns it around (bidi controls,
    zero-widths, controls, blank Hangul fillers)."""
    return next((c for c in text if unicodedata.category(c) in ("Cf", "Cc")
                 or c in _BLANK_LETTERS), None)


@functools.cache
def _look_alikes() -> dict[str, str]:
    """character -> the plainest of its look-alikes ("А" -> "A") or the sequence it looks like
    ("m" -> "rn"), from Unicode TS #39's confusables (each lists its look-alikes)."""
    from confusable_homoglyphs.confusables import confusables_data

    marks = "\u200e\u200f"   # around right-to-left characters
    alike = {k.strip(marks): [e["c"].strip(marks) for e in v] for k, v in confusables_data.items()}
    drawn = {}
    for char, glyphs in alike.items():
        if len(char) != 1:
            continue
        if len(glyphs) == 1 and len(glyphs[0]) > 1:
            drawn[char] = glyphs[0]
            continue
        star = {char, *glyphs}.union(*(alike.get(g, ()) for g in glyphs))
        drawn[char] = min((c for c in star if len(c) == 1), key=lambda c: (not c.isascii(), ord(c)))
    return drawn


def skeleton(text: str) -> str:
    """What ``text`` looks like (Unicode TS #39's skeleton)."""
    table = _look_alikes()
    mapped = "".join(table.get(c, c) for c in unicodedata.normalize("NFD", text))
    # twice: the letters of a sequence ("m" -> "rn") have look-alikes of their own
    return unicodedata.normalize("NFD", "".join(table.get(c, c) for c in mapped))


def look_keys(nickname: str) -> frozenset[str]:
    """Keys two nicknames share when one may be taken for the other: the same text in another
    case, or the same skeleton as typed or in lower case (after NFKC: "Ａｎａ" is "Ana")."""
    text = unicodedata.normalize("NFKC", nickname)
    folded = text.casefold()
    return frozenset({"case:" + folded, "look:" + skeleton(text), "look:" + skeleton(folded)})


def confusable_with(nickname: str, others: Iterable[str]) -> str | None:
    """The first of ``others`` that ``nickname`` may be taken for, or None."""
    mine = look_keys(nickname)
    return next((other for other in others if mine & look_keys(other)), None)


def clean_title(title: Any) -> str:
    """A class title: one line, 1 to ``TITLE_MAX`` characters."""
    text = " ".join(str(title or "").split())
    if not 0 < len(text) <= TITLE_MAX:
        raise ClassError("class.title_length", field="title", n=TITLE_MAX)
    return text
