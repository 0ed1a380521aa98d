"""The Speed page (issue 13) through the real entry point: the "what each trick buys" chart
and a sentence per trick in three languages, from a recorded ablation; a row's button puts the
row's settings into the Train page's knobs (the last row: the one-minute preset)."""
from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from cifarlab import i18n
from cifarlab.lab import speed
from data_support import pages_queue

APP = "../app.py"


def fake_record() -> dict:
    rows = [{"name": name, "accuracy": 0.3 + 0.05 * i, "seconds": 60.0 - 5 * i,
             "images_per_second": 1000.0, "config": config.replace(train_subset=10000).to_dict()}
            for i, (name, config) in enumerate(speed.row_configs())]
    return {"date": "2026-11-24", "machine": {"cpu": "AMD EPYC", "cores": 2}, "rows": rows}


@pytest.fixture
def open_page(monkeypatch, tmp_path, cifar_archive, cifar_cache_dir):
    record = tmp_path / "speed_ablation.json"
    record.write_text(json.dumps(fake_record()))
    monkeypatch.setattr(speed, "RECORD", record)
    pages_queue(monkeypatch, tmp_path / "home", cifar_archive, cifar_cache_dir)

    def open_(lang: str = "en") -> AppTest:
        at = AppTest.from_file(APP, default_timeout=120)
        at.query_params["lang"] = lang
        at.run()
        at.switch_page("pages/speed.py")
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    open_.record = record
    return open_


def body(at: AppTest) -> str:
    return "\n".join(e.value for kind in ("markdown", "caption", "info", "success")
                     for e in getattr(at, kind))


@pytest.mark.parametrize("lang", ["en", "es", "pt"])
def test_chart_and_a_sentence_per_trick_in_every_language(open_page, lang):
    t = i18n.translator(lang)
    at = open_page(lang)
    assert at.title[0].value == t("speed.title") and not at.error
    text = body(at)
    for name in speed.ROW_NAMES:
        assert t(f"speed.why_{name}") in text and t(f"speed.row_{name}") in text
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert [tr["type"] for tr in fig["data"]] == ["bar", "scatter"]
    assert fig["data"][0]["x"] == [t(f"speed.row_{n}") for n in speed.ROW_NAMES]
    assert fig["data"][0]["y"] == \
        pytest.approx([0.3 + 0.05 * i for i in range(len(speed.ROW_NAMES))])
    assert fig["data"][0]["text"][0] == i18n.percent(0.3, lang, 1)   # "30,0 %" in es and pt
    assert fig["layout"]["separators"] == i18n.separators(lang)
    uses = [b for b in at.button if b.key and b.key.startswith("speed_use_")]
    assert len(uses) == len(speed.ROW_NAMES)
    assert at.dataframe[0].value.shape[0] == 20   # input, 3 × (conv, bn, relu, pool), fc head, sum


def test_a_row_button_fills_the_train_pages_knobs(open_page):
    at = open_page("es")
    t = i18n.translator("es")
    at.switch_page("pages/train.py")      # the student had typed on the Train page first
    at.run()
    at.text_input(key="train_lr").set_value("0,05")
    at.number_input(key="train_seed").set_value(7).run()
    at.switch_page("pages/speed.py")
    at.run()
    at.button(key="speed_use_" + speed.ROW_NAMES[-1]).click().run()   # the last row
    assert not at.exception
    assert t("speed.applied") in body(at)
    form = at.session_state["train_form"]    # the Train form's one owner took the row
    values = form.values()
    assert (values["net"], values["augment"], values["tta"]) == ("bn3", "flip", True)
    assert form.shown("lr") == "0,2" and values["train_subset"] is None   # the whole set
    assert values["seed"] == 7                                           # no row sets it
    at.switch_page("pages/train.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]     # every knob valid, the seed included
    assert at.radio(key="train_net").value == "bn3"
    assert at.text_input(key="train_lr").value == "0,2"
    assert at.text_input(key="train_label_smoothing").value == "0,1"
    assert at.number_input(key="train_seed").value == 7
    # the last row is the one-minute preset: the Train page says so
    assert t("train.preset_one_minute_cpu_help") in [c.value for c in at.caption]


def test_without_a_record_the_page_says_how_to_make_one(open_page):
    open_page.record.unlink()
    at = open_page("pt")
    assert i18n.t("speed.no_record", "pt") in body(at)
    assert not at.get("plotly_chart")
