"""Setting values from text or TOML: whole numbers, finite numbers, a run store's URL.
Each returns the value, or None (or, for a URL, what is wrong with it) for the caller's
message; ``cifarlab.serve.settings`` names the setting and where it came from."""
from __future__ import annotations

from typing import Any


def as_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.lstrip("+").isdigit():
        return int(v)
    return None


def as_float(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    try:
        value = float(v)
    except (TypeError, ValueError):
        return None
    return value if value == value and value not in (float("inf"), float("-inf")) else None


def url_problem(value: Any) -> str | None:
    """None when ``value`` is unset or a run store URL (``postgresql://...``, psycopg 3, or
    ``sqlite:///path``); else the value as it may be shown: without its password."""
    if value is None or (isinstance(value, str) and not value):
        return None
    from sqlalchemy.engine import make_url   # only when a URL is set

    try:
        url = make_url(value) if isinstance(value, str) else None
    except Exception:  # noqa: BLE001 - SQLAlchemy's ArgumentError, ValueError for a bad port
        url = None
    if url is not None and url.database and url.get_backend_name() in ("postgresql", "sqlite"):
        return None
    return (url.render_as_string(hide_password=True) if url is not None
            else repr(str(value).split("@")[-1])[:80])
