"""Numbers and plurals in the student's language, engine by engine (no pages, no data): small
values without a program's "e" notation, CLDR plural forms in the catalogs, and the tables the
pages show (Runs, Data) with numbers in the language's notation and "–" where there is none."""
from __future__ import annotations

import math
import re
import time
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cifarlab import i18n
from cifarlab.core.config import TrainConfig
from cifarlab.lab import data as loading
from cifarlab.lab import runs as R

LANGS = list(i18n.LANGUAGES)


# ----------------------------------------------------------------------- significant figures

@pytest.mark.parametrize("value,lang,text", [
    (0.00035, "pt", "3,50 × 10⁻⁴"), (0.00035, "en", "3.50 × 10⁻⁴"), (1.3642, "es", "1,36"),
    (1.3642, "en", "1.36"), (0.0123456, "pt", "0,0123"), (99.1953, "es", "99,2"),
    (9.996e-5, "pt", "1,00 × 10⁻⁴"), (2.5e7, "es", "2,50 × 10⁷"), (0.0, "pt", "0"),
    (float("nan"), "es", "–"), (None, "pt", "–"),
])
def test_significant_figures_in_the_language(value, lang, text):
    assert i18n.significant(value, lang) == text


@pytest.mark.parametrize("missing", [None, float("nan"), float("inf"), np.float32("nan")])
@pytest.mark.parametrize("lang", LANGS)
def test_a_missing_value_reads_as_a_dash_in_every_format(missing, lang):
    # one rule for every table and sentence: no "None", "nan" or "?" and no Babel error
    assert {i18n.number(missing, lang), i18n.number(missing, lang, 2), i18n.percent(missing, lang),
            i18n.duration(missing, lang), i18n.significant(missing, lang)} == {"–"}


@pytest.mark.parametrize("lang,text", [("en", "50,000 · 55.3% · 1 min 5 s"),
                                       ("es", "50.000 · 55,3\u00a0% · 1 min 5 s")])
def test_numpy_numbers_are_written_like_pythons(lang, text):
    assert " · ".join((i18n.number(np.int64(50_000), lang), i18n.percent(np.float32(0.553), lang),
                       i18n.duration(np.float64(65), lang))) == text


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300),
       st.sampled_from(LANGS), st.integers(1, 6))
def test_significant_never_writes_e_notation_and_keeps_the_value(value, lang, digits):
    text = i18n.significant(value, lang, digits)
    assert "e" not in text.lower() and "nan" not in text.lower()
    decimal, group = i18n.separators(lang)
    mantissa, _, power = text.partition(" × 10")
    back = float(mantissa.replace(group, "").replace(decimal, ".").replace("\u2212", "-"))
    if power:
        back *= 10 ** int(power.translate(str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")))
    assert math.isclose(back, value, rel_tol=10 ** (1 - digits), abs_tol=1e-300)


# -------------------------------------------------------------------------------- plurals

def test_every_plural_has_its_other_form_in_every_language():
    for lang in LANGS:
        cat = i18n.catalog(lang)
        stems = {k.rsplit(".", 1)[0] for k in cat if k.endswith((".one", ".few", ".many"))}
        assert stems, "no plural keys: the check would prove nothing"
        assert all(f"{s}.other" in cat for s in stems), lang


@pytest.mark.parametrize("key,params,one,other", [
    ("network.remainder", {"s": 2}, {"en": "the last pixel", "es": "el último píxel",
                                     "pt": "o último pixel"}, {"pt": "os últimos 3 pixels"}),
    ("errors.config.epochs_limit", {}, {"en": "at most 1 epoch ", "es": "como mucho 1 época ",
                                        "pt": "no máximo 1 época "},
     {"pt": "no máximo 3 épocas "}),
    ("train.epochs_limit_help", {}, {"pt": "no máximo 1 época "}, {"es": "como mucho 3 épocas"}),
    ("counts.train_images", {}, {"pt": "1 imagem de treino"}, {"es": "3 imágenes"}),
])
def test_a_count_of_one_reads_in_the_singular(key, params, one, other):
    for lang in LANGS:
        single, many = i18n.t(key, lang, n=1, **params), i18n.t(key, lang, n=3, **params)
        assert single != many
        assert one.get(lang, "") in single and other.get(lang, "") in many
    assert "últimos 1 " not in i18n.t("network.remainder", "pt", n=1, s=2)


def test_the_limits_sentence_counts_each_of_its_numbers():
    def limits(lang, epochs, images, runs):
        t = i18n.translator(lang)
        return t("train.limits", epochs=t("counts.epochs", n=epochs),
                 images=t("counts.train_images", n=images), runs=t("counts.runs", n=runs))
    assert "no máximo 1 época e 50.000 imagens de treino" in limits("pt", 1, 50_000, 1)
    assert "e 1 execução na fila" in limits("pt", 1, 50_000, 1)
    assert "como mucho 20 épocas y 1 imagen de entrenamiento" in limits("es", 20, 1, 2)


# ------------------------------------------------------------------------------- the tables

def _run(status: str, result: dict | None, config: dict | None = None):
    now = time.time()
    return SimpleNamespace(id=f"{status:a<32}"[:32], name="", status=status, started_at=now,
                           created_at=now, config=config or TrainConfig().to_dict(),
                           result=result, device="cpu")


def _shown_cells(styler) -> list[str]:
    html = styler.to_html()
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>.*?</td>", html)]


@pytest.mark.parametrize("lang", LANGS)
def test_the_runs_table_writes_numbers_in_the_language_and_no_none(lang):
    t = i18n.translator(lang)
    done = _run("done", {"test_accuracy": 0.5353, "final_loss": 1.2345678,
                         "images_per_second": 1272.61, "train_seconds": 368.83, "steps": 25_000})
    running = _run("running", None, dict(TrainConfig().to_dict(), seed=None))
    df = R.runs_table([done, running])
    cells = _shown_cells(R.compare_table(df, [done.id], ["done", "running"], t))
    assert not [c for c in cells if re.search(r"\b(None|nan|NaN|True|False)\b", c)], cells
    for value in (i18n.number(53.53, lang, 1), i18n.number(1.2345678, lang, 3),
                  i18n.number(1272.61, lang, 0), i18n.number(25_000, lang, 0)):
        assert value in cells, (value, cells)
    assert "–" in cells            # the running run's figures


@pytest.mark.parametrize("lang", LANGS)
def test_the_data_tables_write_numbers_in_the_language(lang):
    t = i18n.translator(lang)
    pics = np.random.default_rng(0).integers(0, 256, (4, 32, 32, 3), dtype=np.uint8)
    stats = loading.transform_stats(pics, bins=8)
    table = loading.ranges_table(stats, t)
    mean = float(np.mean(stats["raw"]["mean"]))
    assert i18n.number(round(mean, 3), lang) in table[t("data.mean_col")].tolist()
    sweep = pd.DataFrame([["tutorial", 4, 2, 1234.567, 300, 1200, 0.9721, 1.25]],
                         columns=["pipeline", "batch_size", "num_workers", "images_per_second",
                                  "batches", "images", "seconds", "startup_seconds"])
    shown = loading.loader_table(sweep, t)
    row = shown.iloc[0].tolist()
    assert row[0] == t("data.pipeline_tutorial")
    assert i18n.number(1235, lang) in row and i18n.number(0.972, lang, 3) in row
    assert all(isinstance(v, str) for v in row)


# --------------------------------------------------------------- lessons and catalog texts

EN_NUMBER = re.compile(r"(?<![\w.,#/:])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+)(?![\w]|[.,]\d)")
CODE = re.compile(r"```.*?```|`[^`]*`", re.S)   # code reads the same in every language


def _localized(token: str, lang: str) -> str:
    whole, _, decimals = token.replace(",", "").partition(".")
    if not decimals:
        return i18n.number(int(whole), lang)
    return i18n.number(float(f"{whole}.{decimals}"), lang, len(decimals))


def _found(token: str, text: str) -> bool:
    return re.search(rf"(?<![\w.,]){re.escape(token)}(?![\w]|[.,]\d)", text) is not None


@pytest.mark.parametrize("lang", [code for code in LANGS if code != "en"])
def test_lessons_and_catalog_texts_write_numbers_in_their_language(lang):
    """A number the English prose writes with a mark ("2,000", "2.30") is written in the
    translation as the app writes it ("2.000", "2,30"), outside code."""
    pairs = [(f"lesson {n}", i18n.lesson(n, "en"), i18n.lesson(n, lang))
             for n in sorted(p.stem for p in (i18n.LOCALES_DIR / "en" / "lessons").glob("*.md"))]
    en, other = i18n.catalog("en"), i18n.catalog(lang)
    pairs += [(k, v, other[k]) for k, v in en.items() if not k.startswith("bundle.nb.")]
    wrong = []
    for where, english, translated in pairs:
        prose = CODE.sub(" ", translated)
        for tok in set(EN_NUMBER.findall(CODE.sub(" ", english))):
            want = _localized(tok, lang)
            if (want != tok and _found(tok, prose)) or not _found(want, prose):
                wrong.append((where, tok, want))
    assert not wrong, wrong[:10]
