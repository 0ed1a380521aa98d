"""Class codes and nicknames: made, normalised and checked here.

A class code is ``<adjective>-<animal>-<number>`` ("blue-fox-42"): easy to read aloud and to
type on a phone. 64 adjectives × 64 animals × 990 numbers (10..999) make 4,055,040 codes, drawn
with ``secrets``; with the join rate limits (``cifarlab.serve.classroom.ratelimit``: at most
``GLOBAL_FAILURES`` wrong codes a minute from everyone together) guessing one of a server's few
open classes takes days of trying, not a lesson's length.

A nickname is what the class sees instead of a name: 1 to ``NICK_MAX`` characters of letters,
digits, spaces, '-', '.' and '_', starting with a letter or digit (so nothing a page renders as
markup or HTML, and no spreadsheet formula in the CSV export).
"""
from __future__ import annotations

import re
import secrets
import unicodedata
from typing import Any

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


def clean_title(title: Any) -> str:
    """A class title: one line, 1 to ``TITLE_MAX`` characters."""
    text = " ".join(str(title or "").split())
    if not text:
        raise ClassError("class.title_empty", field="title")
    if len(text) > TITLE_MAX:
        raise ClassError("class.title_long", field="title", n=TITLE_MAX)
    return text
