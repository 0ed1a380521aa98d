"""UI strings, lessons and numbers in en (the source), es and pt. A miss falls back to English,
then the key (strict: under pytest or ``CIFARLAB_I18N_STRICT=1``, ``KeyError``)."""
from __future__ import annotations

import copy
import functools
import logging
import math
import numbers
import os
import re
import string
import tomllib
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger(__name__)

LANGUAGES: dict[str, str] = {"en": "English", "es": "Español", "pt": "Português"}
DEFAULT = "en"
LOCALES_DIR = Path(__file__).resolve().parents[1] / "locales"

# -- numbers in a language's notation (Babel's CLDR rules): 50,000 / 50.000; 55.3% / 55,3 % --
# Babel's locale for each language: "es" writes 50.000 and 0,001; "pt" is Brazil's, as the course.
BABEL_LOCALES: dict[str, str] = {"en": "en_US", "es": "es", "pt": "pt_BR"}
_SPEC_RE = re.compile(r"^(?P<group>,?)(?:\.(?P<digits>\d+))?(?P<kind>[dfg%]?)$")
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
MISSING = "–"   # how a missing value (None, NaN) reads in every table and sentence


def finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite real number (not a bool), else None."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


@functools.lru_cache(maxsize=8)
def _locale(lang: str):
    from babel import Locale  # on first use: the CLI in English rarely needs it

    code = str(lang or DEFAULT)[:2].lower()
    return Locale.parse(BABEL_LOCALES.get(code, BABEL_LOCALES[DEFAULT]))


def number(value: float | int | None, lang: str = DEFAULT, digits: int | None = None) -> str:
    """``number(50000, "es")`` -> "50.000"; "–" for None, NaN or infinity."""
    from babel.numbers import format_decimal

    if value is None or isinstance(value, numbers.Real) and not math.isfinite(value):
        return MISSING
    if finite(value) is None:
        return str(value)
    pattern = None if digits is None else "#,##0" + ("." + "0" * digits if digits else "")
    return format_decimal(value, format=pattern, locale=_locale(lang),
                          decimal_quantization=digits is not None)


def significant(value: float, lang: str = DEFAULT, digits: int = 3) -> str:
    """``digits`` significant figures, a power of ten outside [0.001, 1e6): "3,50 × 10⁻⁴"."""
    if finite(value) is None:
        return MISSING
    if value == 0:
        return number(0, lang)
    mantissa, _, power = f"{value:.{digits - 1}e}".partition("e")   # rounded once, here
    exponent = int(power)
    if -3 <= exponent < 6:
        return number(float(f"{mantissa}e{exponent}"), lang, max(0, digits - 1 - exponent))
    power = str(exponent).translate(_SUPERSCRIPT)
    return f"{number(float(mantissa), lang, digits - 1)} × 10{power}"


def percent(fraction: float | None, lang: str = DEFAULT, digits: int = 1) -> str:
    """``percent(0.553, "es")`` -> "55,3 %", or "–"."""
    if finite(fraction) is None:
        return MISSING
    loc = _locale(lang)
    pattern = copy.copy(loc.percent_formats[None])  # the language's own ("55,3 %" in Spanish)
    pattern.frac_prec = (digits, digits)
    return pattern.apply(fraction, loc)


def duration(seconds: float | None, lang: str = DEFAULT) -> str:
    """A duration read at a glance: "0,25 s", "12 s", "3 min 5 s", "1 h 2 min"; or "–"."""
    if finite(seconds) is None:
        return MISSING
    s = max(0.0, float(seconds))
    if s < 10:
        return f"{number(s, lang, 2 if s < 1 else 1)} s"
    if s < 60:
        return f"{number(round(s), lang)} s"
    m, sec = divmod(round(s), 60)
    if m < 60:
        return f"{m} min {sec} s" if sec else f"{m} min"
    h, m = divmod(m, 60)
    return f"{h} h {m} min" if m else f"{h} h"


def separators(lang: str = DEFAULT) -> str:
    """``lang``'s decimal and group marks, as plotly's ``layout.separators`` wants them."""
    symbols = _locale(lang).number_symbols.get("latn", {})
    return symbols.get("decimal", ".") + symbols.get("group", ",")


_DECIMAL_RE = re.compile(r"^[+-]?(\d+([.,]\d*)?|[.,]\d+)(e[+-]?\d+)?$")


def parse_decimal(text: Any) -> float | None:
    """"0,01", "0.01" or "1e-3" in any language (no thousands marks: "1,000" is one), or None."""
    raw = str(text if text is not None else "").strip().replace(" ", "").replace("\u00a0", "")
    if not _DECIMAL_RE.match(raw.lower()):
        return None
    value = float(raw.lower().replace(",", "."))
    return value if math.isfinite(value) else None


class _LocaleFormatter(string.Formatter):
    """``str.format`` whose numbers follow the language (``{acc:.1%}`` -> "55,3 %" in es)."""

    def __init__(self, lang: str):
        self.lang = lang

    def format_field(self, value: Any, format_spec: str) -> str:
        m = _SPEC_RE.match(format_spec)
        if not m or isinstance(value, bool) or not isinstance(value, (int, float)):
            return super().format_field(value, format_spec)   # not a number, or its own spec
        digits = int(m["digits"]) if m["digits"] is not None else None
        kind = m["kind"]
        if kind == "%":
            return percent(value, self.lang, 0 if digits is None else digits)
        if kind == "g":
            value = float(format(value, format_spec.lstrip(",")))  # significant digits first
            return number(int(value) if value.is_integer() else value, self.lang)
        if kind == "d" or (isinstance(value, int) and digits is None):
            return number(int(value), self.lang)
        return number(value, self.lang, digits)


@functools.lru_cache(maxsize=256)
def normalize_lang(value: Any) -> str:
    """The code for "es-AR", "pt_BR", an Accept-Language header…; else DEFAULT."""
    for candidate in value.split(",") if isinstance(value, str) else ():
        primary = candidate.split(";")[0].strip().lower().replace("_", "-").split("-")[0]
        if primary in LANGUAGES:
            return primary
    return DEFAULT


def is_strict() -> bool:
    env = os.environ.get("CIFARLAB_I18N_STRICT", "").strip().lower()
    return env in ("1", "true", "yes", "on") if env else "PYTEST_CURRENT_TEST" in os.environ


@functools.cache   # once per message: a page redrawn each second logs it once
def _warn_once(message: str, *args: Any, level: int = logging.WARNING) -> None:
    log.log(level, message, *args)


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, str]:
    # tests/test_i18n.py holds every catalog to strings and each key to one file
    out: dict[str, str] = {}
    for name, value in table.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{name}."))
        else:
            out[f"{prefix}{name}"] = value
    return out


def catalog_files(lang: str) -> list[Path]:   # <lang>.toml, then <lang>/*.toml
    return [*LOCALES_DIR.glob(f"{lang}.toml"), *sorted((LOCALES_DIR / lang).glob("*.toml"))]


@functools.cache
def _load_catalog(lang: str) -> dict[str, str]:
    flat: dict[str, str] = {}
    for path in catalog_files(lang):
        flat.update(_flatten(tomllib.loads(path.read_text(encoding="utf-8"))))
    return flat


def catalog(lang: str = DEFAULT) -> dict[str, str]:
    """Every UI string of a language, as a flat ``{"group.key": text}`` dict (a copy)."""
    return dict(_load_catalog(normalize_lang(lang)))


def _format(template: str, key: str, lang: str, kwargs: dict[str, Any]) -> str:
    try:
        return _LocaleFormatter(lang).format(template, **kwargs)
    except (KeyError, IndexError, ValueError) as exc:
        if is_strict():
            raise KeyError(f"i18n: cannot fill {key!r} ({lang}): {exc!r}; "
                           f"given {sorted(kwargs)}") from exc
        _warn_once("i18n: cannot fill %r (%s): %s", key, lang, repr(exc))
        return template


def _lookup(texts: dict[str, str], key: str, lang: str, kwargs: dict[str, Any]) -> str | None:
    if key in texts:
        return texts[key]
    if f"{key}.other" in texts:
        n = kwargs.get("n", kwargs.get("count"))
        # CLDR's plural category ("one", "other", ...) by Babel's rules
        form = _locale(lang).plural_form(abs(n)) if isinstance(n, (int, float)) else "other"
        return texts.get(f"{key}.{form}", texts[f"{key}.other"])
    return None


def t(key: str, /, lang: str = DEFAULT, **kwargs: Any) -> str:
    code = normalize_lang(lang)
    template = _lookup(_load_catalog(code), key, code, kwargs)
    if template is not None:
        return _format(template, key, code, kwargs)
    if is_strict():
        raise KeyError(f"i18n: no string {key!r} in the {LANGUAGES[code]} catalog "
                       f"(locales/{code}.toml).")
    if code != DEFAULT:
        english = _lookup(_load_catalog(DEFAULT), key, DEFAULT, kwargs)
        if english is not None:
            _warn_once("i18n: %r is missing in %s; showing English.", key, code)
            return _format(english, key, code, kwargs)
    _warn_once("i18n: unknown string key %r.", key, level=logging.ERROR)
    return key


def translator(lang: str) -> Callable[..., str]:
    """``t`` with the language bound (``t.lang``); name it ``t``: the catalog test scans for it."""
    bound = functools.partial(t, lang=normalize_lang(lang))
    bound.lang = bound.keywords["lang"]  # type: ignore[attr-defined]
    return bound


@functools.cache
def _read_lesson(name: str, lang: str) -> str | None:
    path = LOCALES_DIR / lang / "lessons" / f"{name}.md"
    return path.read_text(encoding="utf-8") if path.is_file() else None


def lesson(name: str, lang: str = DEFAULT) -> str:
    """Lesson ``name``'s Markdown in ``lang``, else (not strict) English; unknown: ``KeyError``."""
    code = normalize_lang(lang)
    text = _read_lesson(name, code)
    if text is None and code != DEFAULT and not is_strict():
        text = _read_lesson(name, DEFAULT)
        if text is not None:
            _warn_once("i18n: lesson %r is missing in %s; showing English.", name, code)
    if text is None:
        raise KeyError(f"i18n: no lesson {name!r} in {LANGUAGES[code]} "
                       f"(locales/{code}/lessons/{name}.md).")
    return text


@functools.cache
def code_snippet(name: str) -> str | None:
    """The tutorial's code that lesson ``name`` explains (``locales/code/<name>.py``), or None."""
    path = LOCALES_DIR / "code" / f"{name}.py"
    return path.read_text(encoding="utf-8").strip("\n") + "\n" if path.is_file() else None


def clear_cache() -> None:
    _load_catalog.cache_clear()
    _read_lesson.cache_clear()
    code_snippet.cache_clear()
    _warn_once.cache_clear()
