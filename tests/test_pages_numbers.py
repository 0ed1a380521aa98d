"""Numbers in the student's language on every page that shows a run (AppTest, en/es/pt).

One finished run of the tutorial as written is written straight into a run store
(tests/synthetic_run.py: no training), and beside it, in another session, a run still training.
Results, Runs, Train, Data, Network, Inside and Loss are run in English, Spanish and Portuguese;
every text a student reads is collected (tests/page_text.py), in each tab. Every number that
the English page writes with a thousands or a decimal mark must appear in Spanish and Portuguese
in that language's own notation (Babel's), and never as the English wrote it; nothing reads "None",
"nan", "inf" or Python's "True"/"False", and no number is in scientific notation; every chart
writes its numbers with the language's marks (``layout.separators``).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cifarlab import i18n
from browser_support import english_sentences
from data_support import pages_queue
from page_text import each_tab, page_figures, page_texts, tab_bars
from synthetic_run import write_finished_run, write_running_run

APP = str(Path(__file__).resolve().parents[1] / "app.py")
SID = "numbers-student-0001"
BUSY = "numbers-busy-0002"
PAGES = ("results", "runs", "train", "data", "network", "inside", "loss")
LANGS = list(i18n.LANGUAGES)

# a number written the English way with a mark: 5,353 / 10,000 / 0.54 / 1.36 (not 2.14.1)
EN_NUMBER = re.compile(r"(?<![\w.,#/:])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+)(?![\w]|[.,]\d)")
NOT_A_VALUE = re.compile(r"\b(None|nan|NaN|inf|Infinity)\b|^\s*(True|False)\s*$")  # Python's
# Python and numpy write an exponent with its sign (1e-05, 3.50e+04): a run id of hex digits
# that reads as digits, "e", digits (7e004677) is no number
SCIENTIFIC = re.compile(r"(?<![\w.,])\d+(?:[.,]\d+)?e[+-]\d+(?!\w)", re.I)


@pytest.fixture(scope="module")
def lab(tmp_path_factory, cifar_archive, cifar_cache_dir):
    home = tmp_path_factory.mktemp("numbers-home")
    mp = pytest.MonkeyPatch()
    queue = pages_queue(mp, home, cifar_archive, cifar_cache_dir)
    store = queue.store
    done = write_finished_run(store, SID)
    write_finished_run(store, BUSY, name="first try")
    running = write_running_run(store, BUSY)
    yield {"queue": queue, "store": store, "run": done, "running": running}
    queue.shutdown()
    mp.undo()


def page(name: str, lang: str, sid: str = SID) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["lang"] = lang
    at.query_params["sid"] = sid
    at.switch_page(f"pages/{name}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def in_text(token: str, text: str) -> bool:
    return re.search(rf"(?<![\w.,]){re.escape(token)}(?![\w]|[.,]\d)", text) is not None


def localized(token: str, lang: str) -> str:
    """The English number ``token`` as ``lang`` writes it, with as many decimals."""
    whole, _, decimals = token.replace(",", "").partition(".")
    if not decimals:
        return i18n.number(int(whole), lang)
    return i18n.number(float(f"{whole}.{decimals}"), lang, len(decimals))


@pytest.fixture(scope="module")
def shown(lab):
    """``shown(page, lang, sid)``: that page's texts and figures, each made once."""
    made: dict = {}

    def get(name: str, lang: str, sid: str = SID):
        if (name, lang, sid) not in made:
            at = page(name, lang, sid)
            texts, figures = page_texts(at), page_figures(at)
            for _ in each_tab(at) if tab_bars(at) else ():   # a page drawing its open tab
                texts, figures = texts + page_texts(at), figures + page_figures(at)
            made[name, lang, sid] = (texts, figures)
        return made[name, lang, sid]
    return get


def test_the_english_token_reads_in_each_language():
    assert localized("5,353", "pt") == "5.353" and localized("99.195", "es") == "99,195"
    assert localized("10,000", "es") == "10.000" and localized("0.001", "pt") == "0,001"
    assert EN_NUMBER.findall("5,353 of 10,000 · v2.14.1 · 0.54 · 12:30 · 3.5e-04") == [
        "5,353", "10,000", "0.54"]
    assert SCIENTIFIC.findall("Loss 3.50e-04, 1e-3 · run c4a659e6 · run 7e004677") == [
        "3.50e-04", "1e-3"]


@pytest.mark.parametrize("name", PAGES)
def test_every_number_is_written_in_the_students_language(shown, name):
    english = "\n".join(s for _, s in shown(name, "en")[0])
    tokens = sorted(set(EN_NUMBER.findall(english)))
    assert tokens, f"{name}: no number with a mark in English: the check would prove nothing"
    for lang in ("es", "pt"):
        texts = shown(name, lang)[0]
        text = "\n".join(s for _, s in texts)
        ours = {tok: localized(tok, lang) for tok in tokens}
        verbatim = [(tok, kind, s[:90]) for tok in tokens if ours[tok] != tok
                    for kind, s in texts if in_text(tok, s)]
        assert not verbatim, f"{name} ({lang}) writes English numbers: {verbatim[:12]}"
        missing = [(tok, ours[tok]) for tok in tokens if not in_text(ours[tok], text)]
        assert not missing, f"{name} ({lang}): not found in its own notation: {missing[:12]}"


@pytest.mark.parametrize("sid,name", [(SID, p) for p in PAGES]
                         + [(BUSY, "runs"), (BUSY, "train")])
@pytest.mark.parametrize("lang", LANGS)
def test_no_none_nan_or_scientific_numbers(shown, sid, name, lang):
    texts, figures = shown(name, lang, sid)
    words = set(i18n.catalog(lang).values())     # a label that is the word: "None" (augment)
    bad = [(kind, s[:80]) for kind, s in texts if NOT_A_VALUE.search(s) and s not in words]
    assert not bad, f"{name} ({lang}) shows a missing value or a Python word: {bad[:8]}"
    sci = [(kind, s[:80]) for kind, s in texts if SCIENTIFIC.search(s)]
    assert not sci, f"{name} ({lang}) shows scientific notation: {sci[:8]}"
    marks = i18n.separators(lang)
    wrong = [f.get("layout", {}).get("title", {}) for f in figures
             if f.get("layout", {}).get("separators") != marks]
    assert not wrong, f"{name} ({lang}): charts without the language's marks: {wrong[:4]}"


@pytest.mark.parametrize("lang", LANGS)
def test_results_counts_the_test_images_in_the_language(shown, lang):
    """The caption under the accuracy: "… of the 10,000 test images" with the language's
    thousands mark (10.000 in Portuguese; Spanish writes four digits without one)."""
    texts = [s for kind, s in shown("results", lang)[0] if kind == "caption"]
    ten_thousand = i18n.number(10_000, lang)
    assert any(in_text(ten_thousand, s) for s in texts), texts[:6]


@pytest.mark.parametrize("name", PAGES)
@pytest.mark.parametrize("lang", ["es", "pt"])
def test_no_english_sentence_of_ours_in_any_tab(shown, name, lang):
    """Each tab in the student's language, not only the one the browser walks meet first
    (test_browser.py, test_browser_spanish.py): no sentence of the English catalog."""
    text = "\n".join(s for _, s in shown(name, lang)[0])
    hits = [s for s in english_sentences(lang) if s in text]
    assert not hits, f"{name} ({lang}) shows English: {hits[:5]}"
