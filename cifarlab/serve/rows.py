"""A run's row in the store and back: JSON columns, NaN losses as NULL, its name cleaned."""
from __future__ import annotations

import json
import math
from typing import Any, Sequence

from cifarlab.serve.runs import Run
from cifarlab.serve.schema import JSON_COLUMNS, RUN_COLUMNS


def clean_name(name: str | None) -> str | None:
    """A run's name as stored: one line, spaces collapsed, at most 100 characters."""
    if name is None:
        return None
    return " ".join(str(name).split())[:100] or None


def run_of(row: Sequence[Any]) -> Run:
    d = dict(zip(RUN_COLUMNS, row))
    for key in JSON_COLUMNS:
        d[key] = json.loads(d[key]) if d[key] is not None else None
    d["holds"] = tuple(d["holds"] or ())
    d["cancel_requested"] = bool(d["cancel_requested"])
    return Run(**d)


def dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=_json_default)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, (set, tuple)):
        return list(obj)
    return str(obj)  # a Path, or anything else: its text


def finite_or_none(value: float) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value
