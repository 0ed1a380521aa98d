"""The class experiment through the real entry point (app.py), in English, Spanish and
Portuguese: the console sets one (an empty list, a bad value and too many values refused in
words, the knob named), gives each student their value, the class's picture and its CSV, keeps the
preset form's version, draws it on the projector and stops it; a student's Home shows their
value and where their run sits, and their Train page has the value locked. No training runs
(runs are written into the store)."""
from __future__ import annotations

import pytest

from cifarlab import i18n
from cifarlab.serve import queue as jobs
from test_class_experiment import run_of
from test_pages_class_preset import classroom, joined  # noqa: F401  (the fixture)
from test_pages_classroom import TEACHER, open_app, student, tab, texts

LANGS = list(i18n.LANGUAGES)


@pytest.mark.parametrize("lang", LANGS)
def test_the_console_sets_draws_and_stops_an_experiment(classroom, lang):  # noqa: F811
    t = i18n.translator(lang)
    code = classroom.create_class(TEACHER, "Period 3").code
    for name in ("Ana", "Ben", "Cal"):
        joined(classroom, lang, name, code)
    at = open_app(lang, f"teacher-{lang}-experiment", instructor=True, page="pages/classroom.py")
    tab(at, lang, "classroom.experiment.title")
    assert t("classroom.experiment.none") in texts(at, "caption")
    lr = t("common.lr")
    at.selectbox(key="cls_ex_knob").set_value("lr")
    for typed, *needles in [("", lr), (f"{i18n.number(0.01, lang)}; abc", lr, "abc"),
                            ("1 2 3 4 5 6 7 8 9", "8", "9")]:
        at.text_input(key="cls_ex_values").set_value(typed)
        at.button(key="cls_ex_start").click().run()
        [error] = texts(at, "error")
        assert all(n in error for n in needles), error
        assert classroom.get_class(TEACHER, code).experiment is None
        assert at.text_input(key="cls_ex_values").value == typed     # nothing typed is lost
    typed = "; ".join(i18n.number(v, lang) for v in (1.0, 0.0001, 0.01))
    at.text_input(key="cls_ex_values").set_value(typed)
    at.button(key="cls_ex_start").click().run()
    info = classroom.get_class(TEACHER, code)
    assert texts(at, "success") == [t("classroom.experiment.started", version=info.version)]
    assert info.experiment.values == (0.0001, 0.01, 1.0)
    # the console opened anew (another device, a reload) has the running experiment in its form
    again = open_app(lang, f"teacher-{lang}-experiment-2", instructor=True,
                     page="pages/classroom.py")
    tab(again, lang, "classroom.experiment.title")
    assert again.selectbox(key="cls_ex_knob").value == "lr"
    assert again.text_input(key="cls_ex_values").value == "; ".join(
        i18n.number(v, lang) for v in (0.0001, 0.01, 1.0))
    shown = [i18n.number(v, lang) for v in info.experiment.values]
    assert t("classroom.experiment.compares", knob=lr, values=", ".join(shown)) in \
        texts(at, "markdown")
    # round robin, in the order they joined: each student's Train form has theirs
    assert [classroom.student_view(student(f"{n.lower()}-{lang}-session")).values["lr"]
            for n in ("Ana", "Ben", "Cal")] == list(info.experiment.values)
    assert t("classroom.experiment.empty") in texts(at, "info")

    store = jobs.get_queue().store
    for name, lr_value, acc in (("Ana", 0.0001, 0.2), ("Ben", 0.01, 0.45), ("Cal", 1.0, None)):
        run_of(store, code, student(f"{name.lower()}-{lang}-session"), lr_value, acc)
    at.run()
    assert len(at.get("plotly_chart")) == 1
    [csv] = [b for b in at.get("download_button") if b.proto.label == t("classroom.experiment.csv")]
    assert t("classroom.experiment.png_hint") in texts(at, "caption")
    # the experiment bumped the class's version: the preset form knows it, a push is no stale
    tab(at, lang, "classroom.preset.title")
    at.button(key="cls_push_btn").click().run()
    assert texts(at, "success") == [t("classroom.preset.pushed", version=info.version + 1)]

    # the projector draws it
    tab(at, lang, "classroom.board.title")
    assert t("classroom.experiment.png_hint") not in texts(at, "caption")   # polls when shown
    at.button(key="cls_presenter_open").click().run()
    at.segmented_control(key="cls_pv_show").set_value("experiment").run()
    assert len(at.get("plotly_chart")) == 1 and not at.sidebar.children
    at.button(key="cls_pv_back").click().run()

    tab(at, lang, "classroom.experiment.title")
    at.button(key="cls_ex_stop").click().run()
    assert texts(at, "success") == [t("classroom.experiment.stopped")]
    assert classroom.get_class(TEACHER, code).experiment is None
    assert not at.exception


@pytest.mark.parametrize("lang", LANGS)
def test_a_student_sees_their_value_and_their_run_in_the_picture(classroom, lang):  # noqa: F811
    t = i18n.translator(lang)
    info = classroom.create_class(TEACHER, "Period 3")
    ana = joined(classroom, lang, "Ana", info.code)
    ben = joined(classroom, lang, "Ben", info.code)
    classroom.set_experiment(TEACHER, info.code, "lr", "0.001 0.01", info.version)
    store = jobs.get_queue().store
    run_of(store, info.code, student(ana), 0.001, 0.3)
    run_of(store, info.code, student(ben), 0.01)
    lr, mine = t("common.lr"), i18n.number(0.01, lang)
    at = open_app(lang, ben)                                           # Home
    [banner] = [b for b in texts(at, "info") if t("classroom.banner.experiment", knob=lr,
                                                      value=mine) in b]
    assert t("classroom.experiment.compares", knob=lr, values=", ".join(
        i18n.number(v, lang) for v in (0.001, 0.01))) in texts(at, "markdown")
    assert len(at.get("plotly_chart")) == 1
    at.switch_page("pages/train.py")
    at.run()
    box = at.text_input(key="train_lr")
    assert box.value == mine and box.disabled
    assert not at.exception
