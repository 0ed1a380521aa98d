"""Class codes and nicknames: made, normalised and checked here.

A class code is ``<adjective>-<animal>-<number>`` ("blue-fox-42"): easy to read aloud and to
type on a phone. 64 adjectives × 64 animals × 990 numbers (10..999) make 4,055,040 codes, drawn
with ``secrets``; with the join limits (``cifarlab.serve.classroom.ratelimit``: a browser that
keeps guessing waits longer and longer, and so does every guessing browser while many wrong codes
are tried) guessing one of a server's few open classes takes far longer than a lesson.

A nickname is what the class sees instead of a name: 1 to ``NICK_MAX`` characters of letters,
digits, spaces, '-', '.' and '_', starting with a letter or digit (so nothing a page renders as
markup or HTML, and no spreadsheet formula in the CSV export), without invisible or
text-direction characters, and not confusable with a nickname already in the class
(``confusable_with``: the same letters in another case, or the same Unicode TS #39 skeleton
after NFKC, from the confusables data that ``confusable_homoglyphs`` ships: "Аna" with a
Cyrillic А is "Ana").
"""
from __future__ import annotations

import functools
import re
import secrets
import unicodedata
from typing import Any, Iterable

from cifarlab.serve.classroom.model import ClassError

ADJECTIVES = (
    "amber", "azure", "bold", "brave", "bright", "brisk", "calm", "clever", "cool", "coral",
    "cosmic", "crisp", "curly", "dandy", "eager", "early", "fancy", "fast", "fluffy", "fresh",
    "gentle", "giant", "glad", "golden", "grand", "green", "happy", "hazel", "humble", "icy",
    "jolly", "keen", "kind", "lively", "lucky", "lunar", "merry", "mighty", "misty", "noble",
    "olive", "pink", "plucky", "polar", "proud", "quick", "quiet", "rapid", "red", "rosy",
    "royal", "rusty", "shiny", "silver", "sleepy", "snowy", "solar", "spicy", "sunny", "swift",
    "tidy", "violet", "witty", "zesty")
ANIMALS = (
    "ant", "badger", "bat", "bear", "beaver", "bee", "bison", "boar", "camel", "cat", "cobra",
    "crab", "crane", "crow", "deer", "dingo", "dog", "dove", "duck", "eagle", "eel", "elk",
    "falcon", "ferret", "finch", "fox", "frog", "gecko", "goat", "goose", "hare", "hawk",
    "heron", "horse", "ibis", "koala", "lemur", "lion", "llama", "lynx", "mole", "moose",
    "mouse", "newt", "otter", "owl", "panda", "parrot", "puma", "quail", "rabbit", "raven",
    "seal", "shark", "sloth", "snail", "swan", "tiger", "toad", "trout", "turtle", "whale",
    "wolf", "yak")
CODE_RE = re.compile(r"[a-z]{2,12}-[a-z]{2,12}-[1-9][0-9]{1,2}")
NICK_MAX = 24
TITLE_MAX = 80
_NICK_RE = re.compile(r"[^\W_][\w .-]*")


def new_code() -> str:
    """A fresh random class code (the caller retries on the rare clash)."""
    return (f"{secrets.choice(ADJECTIVES)}-{secrets.choice(ANIMALS)}-"
            f"{10 + secrets.randbelow(990)}")


def normalize_code(code: Any) -> str | None:
    """What a student typed, as a code ("Blue Fox 42 " -> "blue-fox-42"); None if it cannot
    be one (no lookup is made for it)."""
    if not isinstance(code, str) or len(code) > 40:
        return None
    text = "-".join(code.strip().lower().replace("_", " ").replace("-", " ").split())
    return text if CODE_RE.fullmatch(text) else None


def clean_nickname(nickname: Any) -> str:
    """The nickname as stored (spaces collapsed, NFC), or ClassError naming what is wrong."""
    if not isinstance(nickname, str):
        raise ClassError("class.nickname_empty", field="nickname")
    text = " ".join(unicodedata.normalize("NFC", nickname).split())
    hidden = invisible(text)
    if hidden is not None:
        raise ClassError("class.nickname_invisible", field="nickname", char=f"U+{ord(hidden):04X}")
    if not text:
        raise ClassError("class.nickname_empty", field="nickname")
    if len(text) > NICK_MAX:
        raise ClassError("class.nickname_long", field="nickname", n=NICK_MAX, got=len(text))
    if not _NICK_RE.fullmatch(text):
        raise ClassError("class.nickname_markup", field="nickname")
    return text


def nickname_key(nickname: str) -> str:
    """Two nicknames that differ only in case are one nickname."""
    return nickname.casefold()


# Letters Unicode draws as nothing (default-ignorable, yet letters, so \w takes them).
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")


def invisible(text: str) -> str | None:
    """The first character of ``text`` that shows nothing or turns the text around: a format
    character (Unicode category Cf: the bidi controls U+202A-U+202E, U+2066-U+2069, U+200E/F
    and U+061C, zero-width spaces and joiners, the soft hyphen), a control character, or a
    blank Hangul filler. None when there is none."""
    for ch in text:
        if unicodedata.category(ch) in ("Cf", "Cc") or ch in _BLANK_LETTERS:
            return ch
    return None


@functools.cache
def _look_alikes() -> dict[str, str]:
    """character -> what it is drawn like (one member of its set of look-alikes, or the
    sequence it looks like: "m" -> "rn"), from Unicode's confusables data as
    ``confusable_homoglyphs`` ships it (each character with its homoglyphs, right-to-left ones
    wrapped in direction marks)."""
    from confusable_homoglyphs.confusables import confusables_data

    def plain(s: str) -> str:
        return s.replace("\u200e", "").replace("\u200f", "")

    parent: dict[str, str] = {}

    def root(c: str) -> str:
        while parent.get(c, c) != c:
            parent[c] = parent.get(parent[c], parent[c])
            c = parent[c]
        return c

    sequences: dict[str, str] = {}
    for char, glyphs in confusables_data.items():
        char = plain(char)
        if len(char) != 1:
            continue
        singles = [g for g in (plain(e["c"]) for e in glyphs) if len(g) == 1]
        longer = [g for g in (plain(e["c"]) for e in glyphs) if len(g) > 1]
        if longer and not singles:
            sequences[char] = longer[0]
        for g in singles:
            a, b = root(char), root(g)
            if a != b:
                parent[a] = b
    members: dict[str, list[str]] = {}
    for c in parent:
        members.setdefault(root(c), []).append(c)
    drawn = {}
    for group in members.values():
        shape = min(group, key=lambda c: (not c.isascii(), ord(c)))
        drawn.update((c, shape) for c in group if c != shape)
    for char, seq in sequences.items():
        drawn[char] = "".join(drawn.get(c, c) for c in seq)
    return drawn


def skeleton(text: str) -> str:
    """What ``text`` looks like (Unicode TS #39's skeleton): two strings with the same
    skeleton are confusable."""
    table = _look_alikes()
    mapped = "".join(table.get(c, c) for c in unicodedata.normalize("NFD", text))
    return unicodedata.normalize("NFD", mapped)


def look_keys(nickname: str) -> frozenset[str]:
    """Keys two nicknames share when one may be taken for the other: the same text in another
    case, or the same skeleton as typed or in lower case (after NFKC, so "Ａｎａ" is "Ana")."""
    text = unicodedata.normalize("NFKC", nickname)
    folded = text.casefold()
    return frozenset({"case:" + folded, "look:" + skeleton(text), "look:" + skeleton(folded)})


def confusable_with(nickname: str, others: Iterable[str]) -> str | None:
    """The first of ``others`` that ``nickname`` may be taken for, or None."""
    mine = look_keys(nickname)
    for other in others:
        if mine & look_keys(other):
            return other
    return None


def clean_title(title: Any) -> str:
    """A class title: one line, 1 to ``TITLE_MAX`` characters."""
    text = " ".join(str(title or "").split())
    if not text:
        raise ClassError("class.title_empty", field="title")
    if len(text) > TITLE_MAX:
        raise ClassError("class.title_long", field="title", n=TITLE_MAX)
    return text
