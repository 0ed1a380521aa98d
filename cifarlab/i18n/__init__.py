"""UI strings and lessons in en (the source), es and pt. A miss falls back to English, then the
key (strict: under pytest or ``CIFARLAB_I18N_STRICT=1``, ``KeyError``); ``key.one`` is a plural."""
from __future__ import annotations

import functools
import logging
import os
import tomllib
import unicodedata
from pathlib import Path
from typing import Any, Callable

from cifarlab.i18n.numbers import (BABEL_LOCALES, _locale, _LocaleFormatter, duration, finite,
                                   number, parse_decimal, percent, separators, significant)

__all__ = ["BABEL_LOCALES", "duration", "finite", "number", "parse_decimal", "percent",
           "separators", "significant"]   # re-exported from numbers

log = logging.getLogger(__name__)

LANGUAGES: dict[str, str] = {"en": "English", "es": "Español", "pt": "Português"}
DEFAULT = "en"
LOCALES_DIR = Path(__file__).resolve().parents[1] / "locales"


# Names and codes people type or browsers send, accents stripped and lower-cased.
_ALIASES: dict[str, str] = {
    "en": "en", "eng": "en", "english": "en", "ingles": "en",
    "es": "es", "spa": "es", "esp": "es", "spanish": "es", "espanol": "es", "castellano": "es",
    "espanhol": "es",
    "pt": "pt", "por": "pt", "portuguese": "pt", "portugues": "pt",
}

@functools.lru_cache(maxsize=256)
def normalize_lang(value: Any) -> str:
    """The code for "es-AR", "pt_BR", "português", an Accept-Language header…; else DEFAULT."""
    for candidate in value.split(",") if isinstance(value, str) else ():
        tag = unicodedata.normalize("NFKD", candidate.split(";", 1)[0].strip().lower())
        tag = "".join(ch for ch in tag if not unicodedata.combining(ch)).replace("_", "-")
        if tag in _ALIASES:
            return _ALIASES[tag]
        primary = tag.split("-", 1)[0].strip()
        if primary in _ALIASES:
            return _ALIASES[primary]
    return DEFAULT


def is_strict() -> bool:
    env = os.environ.get("CIFARLAB_I18N_STRICT", "").strip().lower()
    if env:
        return env in ("1", "true", "yes", "on")
    return "PYTEST_CURRENT_TEST" in os.environ


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
def code_snippet(name: str) -> str:
    """The tutorial's code that lesson ``name`` explains (``locales/code/<name>.py``)."""
    path = LOCALES_DIR / "code" / f"{name}.py"
    if not path.is_file():
        raise KeyError(f"i18n: no code snippet for lesson {name!r} (locales/code/{name}.py).")
    return path.read_text(encoding="utf-8").strip("\n") + "\n"


def clear_cache() -> None:
    _load_catalog.cache_clear()
    _read_lesson.cache_clear()
    code_snippet.cache_clear()
    _warn_once.cache_clear()
