"""Every error a student can cause is a code with parameters, rendered in the student's language.

A ``raise SomeError("An English sentence")`` (or an f-string) would reach a Spanish or Portuguese
student in English; this test finds such places by reading the code, and checks that each code
raised exists in all three catalogs with the same placeholders.
"""
from __future__ import annotations

import ast
import pickle
from pathlib import Path

import pytest

from cifarlab import i18n
from cifarlab.errors import CifarLabError, ConfigError, Problem

ROOT = Path(__file__).resolve().parents[1]
ERROR_NAMES = {"CifarLabError", "ConfigError", "DataError", "DeviceError", "ShapeError",
               "CheckpointError", "JobError", "UploadError", "ImageError", "Problem",
               "ClassError", "IdentityError"}


def _raised_codes():
    """(file, line, first argument node) for each construction of one of our errors."""
    for path in sorted((ROOT / "cifarlab").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", getattr(node.func, "attr", None))
                if name in ERROR_NAMES and node.args:
                    arg = node.args[1] if name == "Problem" and len(node.args) > 1 else node.args[0]
                    yield path.relative_to(ROOT), node.lineno, arg


def test_no_error_is_raised_as_an_english_sentence():
    sentences = []
    for path, line, arg in _raised_codes():
        literal = "".join(v.value for v in getattr(arg, "values", [])
                          if isinstance(v, ast.Constant) and isinstance(v.value, str))
        if (isinstance(arg, ast.JoinedStr) and (" " in literal or not literal)) or (
                isinstance(arg, ast.Constant)
                                               and isinstance(arg.value, str)
                                               and (" " in arg.value or not arg.value)):
            sentences.append(f"{path}:{line}")
    assert not sentences, ("raise a code with parameters (errors.<code> in the catalogs), "
                           f"not a sentence: {sentences}")


def test_every_literal_code_is_in_every_catalog():
    missing = []
    for path, line, arg in _raised_codes():
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and " " not in arg.value:
            for lang in i18n.LANGUAGES:
                if f"errors.{arg.value}" not in i18n.catalog(lang) and not any(
                        k.startswith(f"errors.{arg.value}.") for k in i18n.catalog(lang)):
                    missing.append(f"{path}:{line} errors.{arg.value} ({lang})")
    assert not missing, missing


def test_a_message_follows_the_language_and_its_number_notation(tmp_path, monkeypatch):
    err = CifarLabError("demo.queue_full", n=50000, share=0.5)
    folder = tmp_path / "locales"
    for lang, text in (("en", "Queue full: {n} runs, {share:.0%}."),
                       ("es", "Cola llena: {n} ejecuciones, {share:.0%}.")):
        (folder / lang).mkdir(parents=True)
        (folder / lang / "errors_demo.toml").write_text(f'[errors.demo]\nqueue_full = "{text}"\n')
    monkeypatch.setattr(i18n, "LOCALES_DIR", folder)
    i18n.clear_cache()
    try:
        assert str(err) == "Queue full: 50,000 runs, 50%."
        assert err.text("es") == "Cola llena: 50.000 ejecuciones, 50\xa0%."
    finally:
        monkeypatch.undo()
        i18n.clear_cache()


def test_config_errors_keep_every_problem_and_survive_pickling():
    err = ConfigError([Problem("lr", "x.a"), Problem("epochs", "x.b", {"n": 3})])
    assert [p.field for p in err.problems] == ["lr", "epochs"] and err.field == "lr"
    back = pickle.loads(pickle.dumps(err))
    assert back.problems == err.problems and back.code == "x.a"


@pytest.mark.parametrize("lang,expected", [("en", "50,000 · 0.001 · 55.3%"),
                                           ("es", "50.000 · 0,001 · 55,3\xa0%"),
                                           ("pt", "50.000 · 0,001 · 55,3%")])
def test_numbers_follow_the_locale(lang, expected):
    got = f"{i18n.number(50000, lang)} · {i18n.number(0.001, lang)} · {i18n.percent(0.553, lang)}"
    assert got == expected
