"""One term per concept in each language (cifarlab/locales/glossary.toml): every UI string and
lesson uses the glossary's term, never one of the words it says to avoid."""
from __future__ import annotations

import re
import tomllib

import pytest

from cifarlab import i18n

GLOSSARY = tomllib.loads((i18n.LOCALES_DIR / "glossary.toml").read_text(encoding="utf-8"))
CODE = re.compile(r"```.*?```|`[^`]*`", re.S)   # code is code, in any language
FIELD = re.compile(r"\{[^{}]*\}")                # a {placeholder} is a name, not a word


def texts(lang: str) -> dict[str, str]:
    out = {f"{k} (catalog)": FIELD.sub(" ", v) for k, v in i18n.catalog(lang).items()}
    for name in sorted(p.stem for p in (i18n.LOCALES_DIR / "en" / "lessons").glob("*.md")):
        out[f"lesson {name}"] = CODE.sub(" ", i18n.lesson(name, lang))
    return out


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_each_concept_has_one_term(lang):
    everything = texts(lang)
    joined = "\n".join(everything.values()).lower()
    for concept, terms in GLOSSARY.items():
        entry = terms[lang]
        assert entry["use"].lower() in joined, f"{concept}: '{entry['use']}' is never used ({lang})"
        for word in entry.get("avoid", []):
            pattern = re.compile(rf"\b{re.escape(word)}\b", re.I)
            where = [k for k, v in everything.items() if pattern.search(v)]
            assert not where, f"{concept}: use '{entry['use']}', not '{word}' ({lang}): {where[:8]}"


def test_every_language_is_in_the_glossary():
    for concept, terms in GLOSSARY.items():
        assert set(terms) == set(i18n.LANGUAGES), concept
