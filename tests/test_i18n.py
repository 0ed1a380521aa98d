"""Translations: catalogs complete and consistent in en/es/pt, lessons present, fallback rules,
and every t("…") key used by app.py and pages/*.py present in the catalogs.

Needs only the standard library and pytest.
"""
from __future__ import annotations

import ast
import logging
import re
import string
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from cifarlab import i18n

ROOT = Path(__file__).resolve().parents[1]
LOCALES = ROOT / "cifarlab" / "locales"
OTHERS = [code for code in i18n.LANGUAGES if code != i18n.DEFAULT]
LESSONS = sorted(p.stem for p in (LOCALES / "en" / "lessons").glob("*.md"))
REQUIRED_LESSONS = ("home", "tensors", "data", "network", "loss", "training", "results", "gpu",
                    "runs", "inside", "activation", "validation")
WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")


def _flat(path: Path) -> dict[str, object]:
    """The catalog straight from the file, independent of i18n's loader."""
    with path.open("rb") as fh:
        data = tomllib.load(fh)
    out: dict[str, object] = {}

    def walk(table: dict, prefix: str) -> None:
        for name, value in table.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{name}.")
            else:
                out[f"{prefix}{name}"] = value

    walk(data, "")
    return out


def _fields(text: str) -> set[str]:
    return {f.split(".", 1)[0].split("[", 1)[0]
            for _, f, _, _ in string.Formatter().parse(text) if f is not None}


def _words(text: str) -> int:
    return len(WORD.findall(text))


@pytest.fixture(scope="module")
def files() -> dict[str, dict[str, object]]:
    # the main catalog and the per-area files beside it (locales/<code>/*.toml), merged
    out = {}
    for code in i18n.LANGUAGES:
        merged: dict[str, object] = {}
        for path in i18n.catalog_files(code):
            part = _flat(path)
            assert not set(part) & set(merged), f"{path}: keys defined twice"
            merged.update(part)
        out[code] = merged
    return out


# ------------------------------------------------------------------------------------ catalogs

def test_languages_and_default():
    assert i18n.LANGUAGES == {"en": "English", "es": "Español", "pt": "Português"}
    assert i18n.DEFAULT == "en"
    for code in i18n.LANGUAGES:
        assert (LOCALES / f"{code}.toml").is_file(), f"locales/{code}.toml is missing"


def test_english_catalog_is_substantial(files):
    en = files["en"]
    assert len(en) >= 200
    for key in ("app.title", "app.tagline", "nav.home", "nav.tensors", "nav.data", "nav.network",
                "nav.loss", "nav.train", "nav.results", "nav.runs", "nav.gpu",
                "sidebar.language", "sidebar.device_found", "sidebar.data_source",
                "sidebar.torch_version", "status.queued", "network.not_exact",
                "train.preset_tutorial", "train.queue_full", "results.per_class_swings",
                "gpu.no_gpu", "gpu.recorded_elsewhere"):
        assert key in en, key
    assert _fields(str(en["status.queued"])) == {"n"}


@pytest.mark.parametrize("lang", OTHERS)
def test_every_english_key_is_translated(files, lang):
    missing = sorted(set(files["en"]) - set(files[lang]))
    assert not missing, f"{lang}.toml lacks {len(missing)} key(s) that en.toml has: {missing}"


@pytest.mark.parametrize("lang", OTHERS)
def test_no_key_exists_only_in_a_translation(files, lang):
    extra = sorted(set(files[lang]) - set(files["en"]))
    assert not extra, \
        f"{lang}.toml has key(s) that en.toml lacks (add them to English first): {extra}"


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_values_are_nonempty_strings(files, lang):
    bad = [k for k, v in files[lang].items() if not isinstance(v, str) or not v.strip()]
    assert not bad, f"{lang}.toml: empty or non-string values: {bad}"


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_keys_are_grouped_and_lower_snake_case(files, lang):
    for key in files[lang]:
        parts = key.split(".")
        assert len(parts) >= 2, f"{lang}: {key!r} must sit in a [table]"
        assert all(re.fullmatch(r"[a-z][a-z0-9_]*", p) for p in parts), key


@pytest.mark.parametrize("lang", OTHERS)
def test_placeholders_match_english(files, lang):
    wrong = {k: (sorted(_fields(str(v))), sorted(_fields(str(files["en"][k]))))
             for k, v in files[lang].items()
             if k in files["en"] and _fields(str(v)) != _fields(str(files["en"][k]))}
    assert not wrong, f"{lang}: placeholders differ from English ({lang}, en): {wrong}"


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_every_string_formats(files, lang):
    for key, text in files[lang].items():
        names = _fields(str(text))
        assert not names & {"key", "lang"}, f"{key}: placeholders may not be called key or lang"
        # every template fills with its own placeholders and no others (a number where the
        # placeholder has a number's format, such as {seconds:g})
        import string
        specs = {f.split(".")[0]: s for _, f, s, _ in string.Formatter().parse(str(text)) if f}
        i18n.t(key, lang, **{n: 1.5 if specs.get(n) else "X" for n in names})


def test_catalog_returns_a_copy():
    cat = i18n.catalog("es")
    cat["nav.home"] = "changed"
    assert i18n.t("nav.home", "es") == "Inicio"
    assert i18n.catalog("ES-mx")["nav.home"] == "Inicio"


# ----------------------------------------------------------------------------------------- t()

def test_t_translates_and_formats():
    assert i18n.t("nav.home") == "Home"
    assert i18n.t("nav.home", "es") == "Inicio"
    assert i18n.t("nav.home", "pt_BR") == "Início"
    assert i18n.t("status.queued", "en", n=3) == "Queued (position 3)"
    assert i18n.t("status.queued", "es", n=3) == "En cola (posición 3)"
    assert i18n.t("status.queued", "pt", n=3) == "Na fila (posição 3)"


def test_translator_binds_language():
    t = i18n.translator("pt-BR")
    assert t("train.start") == "Treinar"
    assert t("status.queued", n=2) == "Na fila (posição 2)"


def test_strict_under_pytest_missing_key_raises():
    assert i18n.is_strict()
    with pytest.raises(KeyError):
        i18n.t("no.such_key", "en")
    with pytest.raises(KeyError):
        i18n.t("no.such_key", "es")
    with pytest.raises(KeyError):
        i18n.t("status.queued", "en")  # placeholder not given


def test_strict_env_switch(monkeypatch):
    monkeypatch.setenv("CIFARLAB_I18N_STRICT", "0")
    assert not i18n.is_strict()
    monkeypatch.setenv("CIFARLAB_I18N_STRICT", "1")
    assert i18n.is_strict()


# ------------------------------------------------------------------------------------ fallback

@pytest.fixture()
def tiny_locales(tmp_path, monkeypatch):
    """A throw-away locales folder where Spanish lacks a key and a lesson."""
    (tmp_path / "en.toml").write_text(
        '[a]\nboth = "Both"\nonly_en = "Only {n} in English"\n', encoding="utf-8")
    (tmp_path / "es.toml").write_text('[a]\nboth = "Ambos"\n', encoding="utf-8")
    (tmp_path / "pt.toml").write_text(
        '[a]\nboth = "Ambos"\nonly_en = "Só {m} em português"\nstray = "x"\n', encoding="utf-8")
    for code in ("en", "pt"):
        (tmp_path / code / "lessons").mkdir(parents=True)
        (tmp_path / code / "lessons" / "intro.md").write_text(f"# intro {code}\n", encoding="utf-8")
    (tmp_path / "es" / "lessons").mkdir(parents=True)
    (tmp_path / "es" / "lessons" / "intro.md").write_text("  \n", encoding="utf-8")
    (tmp_path / "en" / "lessons" / "extra.md").write_text("# extra\n", encoding="utf-8")
    monkeypatch.setattr(i18n, "LOCALES_DIR", tmp_path)
    i18n.clear_cache()
    yield tmp_path
    monkeypatch.undo()
    i18n.clear_cache()


def test_runtime_falls_back_to_english_with_a_warning(tiny_locales, caplog, monkeypatch):
    monkeypatch.setenv("CIFARLAB_I18N_STRICT", "0")
    with caplog.at_level(logging.WARNING, logger="cifarlab.i18n"):
        assert i18n.t("a.only_en", "es", n=2) == "Only 2 in English"
    assert any("only_en" in r.getMessage() and r.levelno == logging.WARNING
               for r in caplog.records)
    assert i18n.t("a.both", "es") == "Ambos"
    # missing everywhere: the key itself, logged as an error, no crash
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="cifarlab.i18n"):
        assert i18n.t("a.nowhere", "es") == "a.nowhere"
    assert any(r.levelno == logging.ERROR for r in caplog.records)
    # a lesson missing in Spanish falls back to English; an unknown lesson is still an error
    assert i18n.lesson("extra", "es") == "# extra\n"
    with pytest.raises(KeyError):
        i18n.lesson("nope", "es")


def test_strict_mode_refuses_to_fall_back(tiny_locales, monkeypatch):
    monkeypatch.setenv("CIFARLAB_I18N_STRICT", "1")
    with pytest.raises(KeyError, match="only_en"):
        i18n.t("a.only_en", "es", n=2)
    with pytest.raises(KeyError):
        i18n.lesson("extra", "es")
    with pytest.raises(KeyError):
        i18n.t("a.only_en", "pt", n=2)  # pt has {m} where English has {n}


# ------------------------------------------------------------------------------- normalize_lang

@pytest.mark.parametrize("value, expected", [
    ("en", "en"), ("es", "es"), ("pt", "pt"), ("ES", "es"), ("Pt", "pt"),
    ("es-AR", "es"), ("es_419", "es"), ("pt_BR", "pt"), ("pt-PT", "pt"), ("en-GB", "en"),
    ("  es  ", "es"), ("Español", "en"), ("spa", "en"),
    ("es-AR,es;q=0.9,en;q=0.8", "es"), ("fr-FR,pt-BR;q=0.8", "pt"),
    ("fr", "en"), ("de-DE", "en"), ("", "en"), ("xx_YY", "en"), (None, "en"), (42, "en"),
])
def test_normalize_lang(value, expected):
    assert i18n.normalize_lang(value) == expected


# ----------------------------------------------------- a browser's locale (st.context.locale)

@pytest.mark.parametrize("locale, expected", [
    ("pt-BR", "pt"), ("pt-PT", "pt"), ("pt", "pt"), ("PT-br", "pt"), ("pt_BR", "pt"),
    ("es", "es"), ("es-ES", "es"), ("es-AR", "es"), ("es-419", "es"), ("es-MX", "es"),
    ("en", "en"), ("en-US", "en"), ("en-GB", "en"),
    # anything else is English: other languages, scripts, names, regions alone, nothing
    ("fr-FR", "en"), ("de", "en"), ("gl-ES", "en"), ("ca-ES", "en"), ("zh-Hant-TW", "en"),
    ("BR", "en"), ("", "en"), ("  ", "en"), (None, "en"), (42, "en"),
])
def test_browser_locale_normalizes_by_its_language(locale, expected):
    assert i18n.normalize_lang(locale) == expected


# -------------------------------------------------------------------------------------- lessons

@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
@pytest.mark.parametrize("name", REQUIRED_LESSONS)
def test_lesson_exists_and_is_not_empty(name, lang):
    path = LOCALES / lang / "lessons" / f"{name}.md"
    assert path.is_file(), f"missing {path.relative_to(ROOT)}"
    text = i18n.lesson(name, lang)
    assert text.strip(), f"{path} is empty"
    assert text.lstrip().startswith("#"), f"{path} should start with a heading"


@pytest.mark.parametrize("name", REQUIRED_LESSONS)
def test_lesson_lengths(name):
    en = _words(i18n.lesson(name, "en"))
    assert 250 <= en <= 600, f"en/{name}.md has {en} words; aim for 250-600"
    for lang in OTHERS:
        n = _words(i18n.lesson(name, lang))
        assert 0.8 * en <= n <= 1.4 * en, (
            f"{lang}/{name}.md has {n} words against {en} in English: is it the same lesson?")


def test_every_lesson_is_in_every_language():
    for lang in i18n.LANGUAGES:
        folder = LOCALES / lang / "lessons"
        found = {p.stem for p in folder.glob("*.md")}
        assert found == set(LESSONS), f"{lang}: {sorted(found)}"


def test_lesson_translations_are_not_copies_of_english():
    for name in LESSONS:
        en = i18n.lesson(name, "en")
        for lang in OTHERS:
            assert i18n.lesson(name, lang) != en, f"{lang}/{name}.md is the English text"


def test_unknown_lesson_raises():
    with pytest.raises(KeyError):
        i18n.lesson("no_such_lesson", "en")
    with pytest.raises(KeyError):
        i18n.lesson("../en", "en")


@pytest.mark.parametrize("name", REQUIRED_LESSONS)
def test_code_snippet_exists_and_parses(name):
    code = i18n.code_snippet(name)
    assert code.strip()
    ast.parse(code)


def test_code_snippets_hold_the_tutorial_lines():
    assert "nn.Conv2d(3, 6, 5)" in i18n.code_snippet("network")
    assert "x.view(-1, 16 * 5 * 5)" in i18n.code_snippet("network")
    assert "transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))" in i18n.code_snippet("data")
    assert "optim.SGD(net.parameters(), lr=0.001, momentum=0.9)" in i18n.code_snippet("loss")
    assert "optimizer.zero_grad()" in i18n.code_snippet("training")
    assert "torch.save(net.state_dict(), PATH)" in i18n.code_snippet("training")
    assert 'torch.device("cuda:0" if torch.cuda.is_available() else "cpu")' in \
        i18n.code_snippet("gpu")
    assert "data[0].to(device), data[1].to(device)" in i18n.code_snippet("gpu")
    assert i18n.code_snippet("no_such_lesson") is None


def test_lessons_state_the_key_facts():
    network = i18n.lesson("network", "en")
    assert "62,006" in network and "16 * 5 * 5" in network
    assert "mat1 and mat2 shapes cannot be multiplied" in network
    assert "⌊(W + 2P − D·(K − 1) − 1) / S⌋ + 1" in network
    for lang in OTHERS:
        assert "⌊(W + 2P − D·(K − 1) − 1) / S⌋ + 1" in i18n.lesson("network", lang)
        assert "mat1 and mat2 shapes cannot be multiplied" in i18n.lesson("network", lang)
    results = i18n.lesson("results", "en")
    assert "54 %" in results and "10 %" in results
    assert "cuda:0" in i18n.lesson("gpu", "en")
    assert "torch.cuda.synchronize()" in i18n.lesson("gpu", "en")


# ------------------------------------------------------------------------------- pages' keys

# t("…") / t('…') whose first argument is a literal starting with a letter: "nav.home", but also a
# malformed "home" (reported as missing). Docstring examples such as t("...") are not keys.
KEY_CALL = re.compile(r"""\bt\(\s*(?P<q>['"])(?P<key>[A-Za-z_][^'"\\\s]*)(?P=q)""")


def _ui_sources() -> list[Path]:
    # pages and their parts (pages/classroom_parts/), their helpers (ui/), and the lab engines
    # that build their figures and words
    sources = ([ROOT / "app.py"] + sorted((ROOT / "pages").rglob("*.py"))
               + sorted((ROOT / "ui").rglob("*.py"))
               + sorted((ROOT / "cifarlab" / "lab").rglob("*.py")))
    return [p for p in sources if p.is_file()]


def _used_keys() -> dict[str, list[str]]:
    used: dict[str, list[str]] = {}
    for path in _ui_sources():
        text = path.read_text(encoding="utf-8")
        for match in KEY_CALL.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            used.setdefault(match["key"], []).append(f"{path.relative_to(ROOT)}:{line}")
    return used


def test_key_scanner_finds_calls():
    sample = 't("nav.home") + i18n.t(\'train.start\', lang) + t( "a.b", n=1) + st("x.y") ' \
             '+ t(f"nav.{x}") + t("...") + t("home")'
    assert [m["key"] for m in KEY_CALL.finditer(sample)] == [
        "nav.home", "train.start", "a.b", "home"]


def test_every_key_used_by_the_pages_exists(files):
    used = _used_keys()
    if not _ui_sources():
        pytest.skip("no app.py or pages/*.py yet")
    for lang, cat in files.items():
        # a plural's key is its variants' stem: "network.remainder" -> ".one", ".other"
        missing = {k: where for k, where in used.items()
                   if k not in cat and f"{k}.other" not in cat}
        assert not missing, f"keys used in the UI but missing in {lang}.toml: {missing}"


# ----------------------------------------------------------------------------------- hygiene

def test_i18n_does_not_import_streamlit():
    imported = set()
    for path in (ROOT / "cifarlab" / "i18n").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported |= {alias.name.split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.Import) for alias in node.names}
        imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom)}
    assert "streamlit" not in imported
    out = subprocess.run(
        [sys.executable, "-c",
         "import sys, cifarlab.i18n as m; m.t('nav.home', 'es'); m.lesson('home', 'pt'); "
         "print('streamlit' in sys.modules)"],
        cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("text, value", [("0,01", 0.01), ("0.01", 0.01), (" 0,9 ", 0.9),
                                         ("1e-3", 0.001), (",5", 0.5), ("2", 2.0),
                                         ("1.000", 1.0), ("-0,1", -0.1)])
def test_a_typed_decimal_reads_with_either_mark(text, value):
    assert i18n.parse_decimal(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "abc", "0,0,1", "1,000.5", "inf", "nan", "1e400", None])
def test_what_is_no_decimal_reads_as_none(text):
    assert i18n.parse_decimal(text) is None
