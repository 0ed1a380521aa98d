"""The classroom's pages through the real entry point (app.py), in English, Spanish and
Portuguese: the instructor's console (create a class, its join link and QR code, push a preset,
a bad value, two instructors editing one class, only the open tab drawn and what its forms kept
across a visit to another), what a student never sees (the console), Home's
join box (the ``?class=`` link, a nickname with markup or 500 characters, a wrong or closed
code, the banner) and the Train page (pushed values, locked knobs disabled with the reason, a
tampered value refused by the server, a later push seen on the next rerun). No training runs:
the refused submit never queues one. The whole story with real runs: test_browser_classroom.py.
"""
from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from streamlit.testing.v1 import AppTest

from cifarlab import i18n
from cifarlab.serve import queue as jobs
from cifarlab.serve.classroom.facade import get_classroom
from cifarlab.serve.classroom.model import ClassError
from cifarlab.serve.identity import Person, passphrase_instructor
from data_support import pages_queue
from ui.signin import INSTRUCTOR_KEY

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
LANGS = list(i18n.LANGUAGES)
TEACHER = passphrase_instructor()


def _stop_queue() -> None:
    if jobs._QUEUE is not None:
        jobs._QUEUE.shutdown(timeout=5)
        jobs._QUEUE = None


@pytest.fixture
def classroom(tmp_path, monkeypatch, cifar_archive, cifar_data, cifar_cache_dir):
    """The server's Classroom over a fresh run store (the pages use the same one)."""
    monkeypatch.delenv("CIFARLAB_CONFIG", raising=False)
    _stop_queue()
    queue = pages_queue(monkeypatch, tmp_path / "home", cifar_archive, cifar_cache_dir)
    yield get_classroom(queue)
    _stop_queue()


def open_app(lang: str, sid: str, *, instructor: bool = False, page: str | None = None,
             **params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)   # a hang guard, not a speed bound
    if instructor:   # what a right passphrase leaves in the session (tests/test_identity.py)
        at.session_state[INSTRUCTOR_KEY] = True
    at.query_params.update(lang=lang, sid=sid, **params)
    at.run()
    if page:
        at.switch_page(page)
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def tab(at: AppTest, lang: str, key: str) -> AppTest:
    """Open one of the console's tabs, as a click on it does (what polls runs only there)."""
    label = i18n.t(key, lang)
    at.session_state["cls_tabs"] = label
    at.run()
    assert at.session_state["cls_tabs"] == label, "no such tab"   # else the first one opens
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest, kind: str) -> list[str]:
    return [e.value for e in getattr(at, kind)]


def student(sid: str) -> Person:
    return Person("browser:" + sid, "")


# ------------------------------------------------------------------------------ instructor
@pytest.mark.parametrize("lang", LANGS)
def test_the_console_creates_a_class_and_pushes_a_preset(classroom, lang):
    t = i18n.translator(lang)
    at = open_app(lang, f"teacher-{lang}-session", instructor=True, page="pages/classroom.py")
    assert at.title[0].value == t("nav.classroom")
    assert t("classroom.no_classes") in texts(at, "info")
    at.text_input(key="cls_title").set_value("Period 3")
    at.button(key="cls_create_btn").click().run()
    code = at.session_state["cls_code"]
    assert texts(at, "success") == [t("classroom.created", code=code)]
    [info] = classroom.my_classes(TEACHER)
    assert (info.code, info.title, info.is_open) == (code, "Period 3", True)
    [link] = [c for c in texts(at, "code") if f"?class={code}" in c]   # the join link
    assert "lang" not in link     # each student's browser picks their language, not this one
    assert t("classroom.board.empty") in texts(at, "info")            # the live board

    tab(at, lang, "classroom.preset.title")
    # a bad decimal: the engine's message in this language, nothing pushed
    at.text_input(key="cls_p_lr").set_value("abc")
    at.button(key="cls_push_btn").click().run()
    assert at.error and classroom.get_class(TEACHER, code).preset == {}
    # a good preset, two knobs locked
    at.text_input(key="cls_p_lr").set_value(i18n.number(0.01, lang))
    at.number_input(key="cls_p_epochs").set_value(1)
    at.checkbox(key="cls_l_epochs").check()
    at.checkbox(key="cls_l_lr").check()
    at.button(key="cls_push_btn").click().run()
    info = classroom.get_class(TEACHER, code)
    assert texts(at, "success") == [t("classroom.preset.pushed", version=info.version)]
    assert info.preset["epochs"] == 1 and info.preset["lr"] == 0.01
    assert set(info.locked) == {"epochs", "lr"}
    # closing the class from its toggle
    at.toggle(key=f"cls_open_{code}").set_value(False).run()
    assert not classroom.get_class(TEACHER, code).is_open
    assert at.toggle(key=f"cls_open_{code}").value is False
    assert not at.exception


def test_two_instructors_editing_one_class(classroom):
    t = i18n.translator("en")
    code = classroom.create_class(TEACHER, "Shared").code
    a = open_app("en", "teacher-a-session", instructor=True, page="pages/classroom.py")
    b = open_app("en", "teacher-b-session", instructor=True, page="pages/classroom.py")
    for page in (a, b):
        tab(page, "en", "classroom.preset.title")
    a.number_input(key="cls_p_epochs").set_value(1)
    a.button(key="cls_push_btn").click().run()
    assert classroom.get_class(TEACHER, code).preset["epochs"] == 1
    b.number_input(key="cls_p_epochs").set_value(3)    # B's page still shows the old version
    b.button(key="cls_push_btn").click().run()
    now = classroom.get_class(TEACHER, code)
    assert texts(b, "error") == [i18n.t("errors.class.stale", "en", version=now.version)]
    assert now.preset["epochs"] == 1                    # A's change was not overwritten
    assert b.number_input(key="cls_p_epochs").value == 3   # nor B's typing lost
    b.button(key="cls_push_btn").click().run()          # B, having seen it, pushes again
    assert classroom.get_class(TEACHER, code).preset["epochs"] == 3
    assert texts(b, "success") == [t("classroom.preset.pushed",
                                     version=classroom.get_class(TEACHER, code).version)]


def test_the_forms_keep_what_was_typed_and_only_the_open_tab_polls(classroom):
    """The console's forms are drawn whichever tab is open (a form keeps what was typed and not
    yet sent only while it stays on the page) and keep what reached the server, here a push
    and an experiment both refused, across tab switches and reruns; the board, which polls,
    runs only while its tab is open."""
    code = classroom.create_class(TEACHER, "Period 3").code
    at = open_app("en", "teacher-tabs-session", instructor=True, page="pages/classroom.py")
    board_empty = i18n.t("classroom.board.empty", "en")
    assert at.session_state["cls_tabs"] == i18n.t("classroom.board.title", "en")   # the first
    assert board_empty in texts(at, "info") and "cls_p_lr" in [w.key for w in at.text_input]
    tab(at, "en", "classroom.preset.title")
    assert board_empty not in texts(at, "info")                      # the board: not drawn
    at.text_input(key="cls_p_lr").set_value("0.0x5")
    at.checkbox(key="cls_l_lr").check()
    at.number_input(key="cls_p_epochs").set_value(4)
    at.button(key="cls_push_btn").click().run()
    assert at.error                                                  # a bad decimal: refused
    tab(at, "en", "classroom.experiment.title")
    at.selectbox(key="cls_ex_knob").set_value("momentum")
    at.text_input(key="cls_ex_values").set_value("0.9; abc")
    at.button(key="cls_ex_start").click().run()
    assert at.error
    assert at.number_input(key="cls_lim_epochs").value is None      # no limit yet
    tab(at, "en", "classroom.board.title")
    at.run()
    at.run()
    tab(at, "en", "classroom.preset.title")
    assert at.text_input(key="cls_p_lr").value == "0.0x5"
    assert at.checkbox(key="cls_l_lr").value and at.number_input(key="cls_p_epochs").value == 4
    tab(at, "en", "classroom.experiment.title")
    assert at.selectbox(key="cls_ex_knob").value == "momentum"
    assert at.text_input(key="cls_ex_values").value == "0.9; abc"
    info = classroom.get_class(TEACHER, code)        # both were refused: nothing pushed or set
    assert info.preset == {} and info.experiment is None


@pytest.mark.parametrize("lang", ["es", "pt"])
def test_a_student_never_gets_the_console(classroom, lang):
    t = i18n.translator(lang)
    at = open_app(lang, f"student-{lang}-console")
    assert t("classroom.join.title") in [m.value.strip("*") for m in at.markdown]
    at.switch_page("pages/classroom.py").run()   # by its address: hidden from a student's menu
    assert not at.exception
    assert [w.value for w in at.warning] == [t("classroom.instructors_only")]
    assert "cls_create_btn" not in [b.key for b in at.button]
    # and the engine refuses a student's instructor action, whatever a page would send
    with pytest.raises(ClassError) as info:
        classroom.create_class(student(f"student-{lang}-console"), "Mine")
    assert info.value.code == "class.not_instructor"


# -------------------------------------------------------------------------------- students
@pytest.mark.parametrize("locale, lang", [("pt-BR", "pt"), ("es-MX", "es"), ("en-GB", "en")])
def test_the_join_link_opens_in_each_students_own_language(classroom, locale, lang):
    code = classroom.create_class(TEACHER, "Period 3").code
    console = open_app("es", "teacher-link-session", instructor=True, page="pages/classroom.py")
    [link] = [c for c in texts(console, "code") if f"?class={code}" in c]
    at = AppTest.from_file(APP, default_timeout=120)   # a hang guard, not a speed bound
    at.context = {"locale": locale}                    # the student's browser
    at.query_params.update(parse_qsl(urlsplit(link).query), sid=f"student-{lang}-link")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    t = i18n.translator(lang)
    box = at.text_input(key="class_join_code")
    assert (box.value, box.label) == (code, t("classroom.join.code"))
    assert at.button(key="class_join_btn").label == t("classroom.join.button")


@pytest.mark.parametrize("lang", LANGS)
def test_joining_a_class_from_home(classroom, lang):
    t = i18n.translator(lang)
    code = classroom.create_class(TEACHER, "Period 3").code
    at = open_app(lang, f"student-{lang}-join", **{"class": code})
    assert at.text_input(key="class_join_code").value == code     # the link filled it in

    def join(code_typed: str, nickname: str) -> AppTest:
        at.text_input(key="class_join_code").set_value(code_typed)
        at.text_input(key="class_join_nickname").set_value(nickname)
        return at.button(key="class_join_btn").click().run()

    join(code, "<b>Ana</b>")
    assert texts(at, "error") == [i18n.t("errors.class.nickname_markup", lang)]
    join(code, "A" * 500)
    assert texts(at, "error") == [i18n.t("errors.class.nickname_length", lang, n=24, got=500)]
    join("blue-fox-99", "Ana")
    assert texts(at, "error") == [i18n.t("errors.class.unknown_code", lang)]
    classroom.set_open(TEACHER, code, False)
    join(code, "Ana")
    assert texts(at, "error") == [i18n.t("errors.class.closed", lang)]
    assert classroom.student_view(student(f"student-{lang}-join")) is None
    classroom.set_open(TEACHER, code, True)
    join(code, "Ana")
    assert texts(at, "success") == [t("classroom.join.joined", title="Period 3",
                                      nickname="Ana")]
    assert t("classroom.banner.class", title="Period 3", nickname="Ana") in texts(at, "info")
    assert classroom.student_view(student(f"student-{lang}-join")).membership.nickname == "Ana"
    at.button(key="class_leave").click().run()
    assert classroom.student_view(student(f"student-{lang}-join")) is None
    assert texts(at, "success") == [t("classroom.join.left")]
    assert not at.exception


@pytest.mark.parametrize("lang", LANGS)
def test_train_shows_the_pushed_preset_and_the_server_refuses_a_locked_knob(classroom, lang):
    t = i18n.translator(lang)
    sid = f"student-{lang}-train"
    info = classroom.create_class(TEACHER, "Period 3")
    info = classroom.push_preset(TEACHER, info.code, {"epochs": 1, "lr": 0.01,
                                                      "train_subset": 300},
                                 locked=["epochs"], expected_version=info.version)
    classroom.join(student(sid), info.code, "Ana", sid)
    at = open_app(lang, sid, page="pages/train.py")
    epochs = at.number_input(key="train_epochs")
    assert epochs.value == 1 and epochs.disabled
    reason = i18n.t("errors.class.locked_reason", lang, title="Period 3")
    assert reason in epochs.help
    assert at.text_input(key="train_lr").value == i18n.number(0.01, lang)
    assert not at.text_input(key="train_lr").disabled
    assert at.number_input(key="train_train_subset").value == 300
    [banner] = [b for b in texts(at, "info") if b.startswith(
        t("classroom.banner.class", title="Period 3", nickname="Ana"))]
    assert t("classroom.banner.locked", knobs=t("common.epochs")) in banner   # its one lock

    # a tampered browser sends epochs = 3 for the disabled box: the server refuses the run
    at.session_state["train_epochs"] = 3
    at.button(key="train_start").click().run()
    refusal = i18n.t("errors.class.knob_locked", lang, knob=t("common.epochs"), value=1)
    assert refusal in texts(at, "error")
    assert jobs.get_queue().runs(sid) == []
    assert at.number_input(key="train_epochs").value == 1    # the pushed value is back

    # a second push reaches the open page on its next rerun, without a reload
    info = classroom.get_class(TEACHER, info.code)
    classroom.push_preset(TEACHER, info.code, {"epochs": 1, "lr": 0.02, "train_subset": 256},
                          locked=["epochs", "lr"], expected_version=info.version)
    at.run()
    assert at.text_input(key="train_lr").value == i18n.number(0.02, lang)
    assert at.text_input(key="train_lr").disabled
    assert at.number_input(key="train_train_subset").value == 256
    assert not at.exception


# ------------------------------------------------------------------ the page's tables (lab)
def test_board_and_leaderboard_tables_and_goal_words():
    from types import SimpleNamespace as Row

    from cifarlab.lab import classroom as view
    from cifarlab.serve.classroom.model import Goal

    board = view.board_table([Row(nickname="Ana", status="queued", queue_position=2,
                                  losses=(2.3, 2.1), progress=None, accuracy=None,
                                  device="cpu", created_at=0.0),
                              Row(nickname="Bo", status="done", queue_position=None,
                                  losses=(2.2, 1.9), progress=1.0, accuracy=0.553,
                                  device="cpu", created_at=0.0)], "es")
    assert list(board["status"]) == [i18n.t("status.in_queue", "es"), i18n.t("status.done", "es")]
    assert board["loss"][1] == [2.2, 1.9] and board["accuracy"][1] == pytest.approx(55.3)
    leaders = view.leader_table([Row(rank=1, nickname="Bo", score=0.553, accuracy=0.5,
                                     finished_at=0.0)], "best_accuracy", "pt")
    assert list(leaders[i18n.t("classroom.challenge.rank", "pt")]) == ["1"]   # a column
    assert leaders.iloc[0][i18n.t("classroom.challenge.score_accuracy", "pt")] == \
        i18n.percent(0.553, "pt", 1)
    assert view.goal_text(Goal("best_accuracy", max_epochs=2, device="cpu"), "es") == \
        i18n.t("classroom.challenge.goal_best_accuracy", "es", epochs=2, device="cpu")
    assert view.goal_text(Goal("fastest_to", target=0.5), "en") == \
        i18n.t("classroom.challenge.goal_fastest_to", "en", target="50%")


def test_a_quiet_class_is_polled_slowly_on_the_console_and_the_projector(classroom, monkeypatch):
    """No run of the class queued or running: the console's board and the projector's board
    ask the browser for their slow poll (as the Train page does), not every two seconds."""
    from pages.classroom_parts import live, presenter

    asked: list = []
    for module in (live, presenter):   # where the pages' fragments call it
        monkeypatch.setattr(module, "set_fragment_interval", asked.append)
    classroom.create_class(TEACHER, "Period 3")
    at = open_app("en", "teacher-quiet-session", instructor=True, page="pages/classroom.py")
    assert asked == [10.0]                                   # the console's board
    asked.clear()
    at.button(key="cls_presenter_open").click().run()
    at.segmented_control(key="cls_pv_show").set_value("board").run()
    assert not at.exception and asked and set(asked) == {10.0}   # the projector's board
