"""The knob schema: what a config field declares about itself, written once beside the field
(``epochs: int = knob(2, kind="int", lo=1, ...)``), and the type and bounds check it implies."""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cifarlab.core.modelspec import is_int
from cifarlab.errors import Problem

_DEVICE_RE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


@dataclass(frozen=True)
class Knob:
    """What the app knows about one config field (every one has a command-line flag)."""

    kind: str                     # "int", "float", "choice", "bool" or "device"
    label: str = ""               # catalog key; <keys>.<name> unless given
    help: str = ""                # catalog key; <keys>.<name>_help unless given
    error: str = ""               # a bad value's message code; config.<name> unless given
    keys: str = "common"
    lo: float | None = None       # inclusive bounds ...
    hi: float | None = None
    lo_open: bool = False         # ... unless open: the bound itself is not allowed
    hi_open: bool = False
    step: float = 1
    choices: tuple[str, ...] = ()
    optional: bool = False        # None is allowed (and means "all"/"default")
    preset: bool = True           # a preset sets it
    widget: bool = True           # the Train page shows it
    tutorial: bool = False        # one of the tutorial's six, shown first

    def parse(self, text: str) -> Any:
        """A value written as text (a flag, a link's ``?lr=0.01``); ValueError when the text is
        none of the kind (bounds are ``knob_problems``')."""
        s = text.strip()
        if self.optional and s.lower() in ("", "none", "all"):
            return None
        if self.kind == "int":
            return int(s)
        if self.kind == "float":
            value = float(s)
            if not math.isfinite(value):
                raise ValueError(text)
            return value
        if self.kind == "bool":
            if s.lower() not in ("true", "1", "yes", "on", "false", "0", "no", "off"):
                raise ValueError(text)
            return s.lower() in ("true", "1", "yes", "on")
        return s


def knob(default: Any, **kw: Any) -> Any:
    """A dataclass field carrying its ``Knob``."""
    return field(default=default, metadata={"knob": Knob(**kw)})


@dataclass(frozen=True)
class KnobField:
    """A config field and its ``Knob``: ``name``, ``default``, ``knob``."""

    name: str
    default: Any
    knob: Knob


def knob_problems(fields: Iterable[KnobField], values: Mapping[str, Any]) -> list[Problem]:
    """Each field's value against its own ``Knob``: its type, choices and bounds."""
    out: list[Problem] = []
    for f in fields:
        k, v = f.knob, values.get(f.name)
        if v is None and k.optional:
            continue
        if not _fits(k, v):
            out.append(Problem(f.name, k.error, {"lo": k.lo, "hi": k.hi, "default": f.default}))
    return out


def _fits(k: Knob, v: Any) -> bool:
    ok = True
    if k.kind == "int":
        ok = is_int(v)
    elif k.kind == "float":
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    elif k.kind == "bool":
        ok = isinstance(v, bool)
    elif k.kind == "choice":
        ok = v in k.choices
    elif k.kind == "device":
        ok = isinstance(v, str) and bool(_DEVICE_RE.match(v.strip().lower()))
    if ok and k.kind in ("int", "float"):
        ok = ((k.lo is None or (v > k.lo if k.lo_open else v >= k.lo))
              and (k.hi is None or (v < k.hi if k.hi_open else v <= k.hi)))
    return ok
