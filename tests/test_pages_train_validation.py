"""The Train page's validation share, through the real entry point: the knob in the Advanced
section in en, es and pt (read in the language's notation), and a finished run with a
validation split shown with its training and validation curves, columns and the gap in words."""
from __future__ import annotations

import json

import pytest

from cifarlab import i18n
from test_pages_train import QUICK, lab, layout, open_train, set_knobs, store, texts, wait_for

__all__ = ["lab"]   # the fixture, shared with test_pages_train


@pytest.mark.parametrize("lang,typed", [("en", "0.2"), ("es", "0,2"), ("pt", "0,2")])
def test_the_validation_share_sits_in_advanced_in_the_language(lab, lang, typed):
    t = i18n.translator(lang)
    at = open_train(f"val-knob-{lang}", lang)
    advanced = t("train.advanced")
    assert [n for _, n, around in layout(at) if n == "train_val_fraction" and advanced in around]
    box = at.text_input(key="train_val_fraction")
    assert box.label == t("common.val_fraction") and box.value == i18n.number(0.0, lang)
    box.set_value(typed).run()
    assert not at.exception and not at.error
    lesson = [e for e in at.expander if e.label == t("lesson.title") + ": "
              + t("train.val_lesson")]
    text = i18n.lesson("validation", lang).strip()
    assert lesson and lesson[0].markdown[0].value.strip() == text


def test_a_run_with_validation_shows_both_curves_in_each_language(lab):
    sid = "val-run-session"
    at = open_train(sid, "es")
    set_knobs(at, train_pipeline="fast", **(QUICK | {"train_epochs": 2}))
    at.text_input(key="train_val_fraction").set_value("0,25").run()
    at.button(key="train_start").click().run()
    assert not at.exception
    (run,) = store(lab).list_runs(session=sid)
    assert run.config["val_fraction"] == 0.25
    done = wait_for(lambda: (r := store(lab).get(run.id)).finished and r, timeout=300)
    assert done.status == "done", done.error
    epochs = done.result["epochs"]
    assert [e["epoch"] for e in epochs] == [1, 2] and all("val_loss" in e for e in epochs)
    for lang in ("en", "es", "pt"):
        t = i18n.translator(lang)
        page = open_train(sid, lang)
        (chart,) = [json.loads(c.proto.spec) for c in page.get("plotly_chart")
                    if c.key == "train_loss_chart"]
        lines = {d["name"]: d for d in chart["data"]}
        train_line, val_line = lines[t("train.val_train_series")], lines[t("train.val_val_series")]
        assert len(train_line["y"]) == len(val_line["y"]) == 2 and "markers" in val_line["mode"]
        assert val_line["y"] == pytest.approx([e["val_loss"] for e in epochs])
        (table,) = [tb.value for tb in page.table if t("train.epoch_col") in list(tb.value.columns)]
        assert t("train.val_loss_col") in list(table.columns)
        assert table[t("train.val_accuracy_col")].tolist() == [
            i18n.percent(e["val_accuracy"], lang, 1) for e in epochs]
        gap = i18n.significant(epochs[-1]["val_loss"], lang)
        assert [c for c in texts(page, "caption") if gap in c and
                t("train.val_val_series").split()[0] in c], texts(page, "caption")
