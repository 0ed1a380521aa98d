"""Numbers in a language's notation (Babel's CLDR rules): 50,000 / 50.000; 55.3% / 55,3 %."""
from __future__ import annotations

import copy
import functools
import math
import numbers
import re
import string
from typing import Any

DEFAULT = "en"

# Babel's locale for each language: "es" writes 50.000 and 0,001; "pt" is Brazil's, as the course.
BABEL_LOCALES: dict[str, str] = {"en": "en_US", "es": "es", "pt": "pt_BR"}
_SPEC_RE = re.compile(r"^(?P<group>,?)(?:\.(?P<digits>\d+))?(?P<kind>[dfge%]?)$")
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
        if kind == "e":
            return significant(value, self.lang, (6 if digits is None else digits) + 1)
        if kind == "g":
            value = float(format(value, format_spec.lstrip(",")))  # significant digits first
            return number(int(value) if value.is_integer() else value, self.lang)
        if kind == "d" or (isinstance(value, int) and digits is None):
            return number(int(value), self.lang)
        return number(value, self.lang, digits)
