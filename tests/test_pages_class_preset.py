"""The class preset, clearly, and the projector's view, through the real entry point (app.py)
in English, Spanish and Portuguese: the student's banner names only the locked knobs; "the
class preset" is a preset button that brings the class's values back, and another preset keeps
the locked ones (saying which); a refusal comes beside Train; the instructor's preset form
gives values in words; a locked seed warns the instructor (an unlocked one gives each student
their own); tied leaderboard places are shared and shown; the presenter view has no sidebar and
nothing personal, and has the class code, its QR code, the running loss, the board and the
leaderboard. No training runs (finished runs are written into the store).
"""
from __future__ import annotations

import pytest

from cifarlab import i18n
from cifarlab.core.config import TrainConfig, knobs
from cifarlab.lab import train_live
from cifarlab.lab.train import RunView
from cifarlab.serve import queue as jobs
from test_classroom import finished
from cifarlab.serve.classroom.facade import get_classroom
from data_support import pages_queue
from test_pages_classroom import TEACHER, _stop_queue, open_app, student, tab, texts

LANGS = list(i18n.LANGUAGES)
# what the console's preset form pushes: every knob, the tutorial's values but these
ALL_KNOBS = {f.name: f.default for f in knobs(TrainConfig) if f.knob.widget}


@pytest.fixture
def classroom(tmp_path, monkeypatch, cifar_archive, cifar_data, cifar_cache_dir):
    """The server's Classroom over a fresh run store (the pages use the same one)."""
    monkeypatch.delenv("CIFARLAB_CONFIG", raising=False)
    _stop_queue()
    queue = pages_queue(monkeypatch, tmp_path / "home", cifar_archive, cifar_cache_dir)
    yield get_classroom(queue)
    _stop_queue()


def push(classroom, code: str, locked, **values):
    info = classroom.get_class(TEACHER, code)
    return classroom.push_preset(TEACHER, code, ALL_KNOBS | values, locked=locked,
                                 expected_version=info.version)


def joined(classroom, lang: str, name: str, code: str) -> str:
    sid = f"{name.lower()}-{lang}-session"
    classroom.join(student(sid), code, name, sid)
    return sid


def in_order(at) -> list:
    """The page's elements in the order a reader meets them."""
    out = []

    def walk(node):
        for child in getattr(node, "children", {}).values():
            out.append(child)
            walk(child)

    walk(at.main)
    return out


def through_app(at) -> None:
    """Run the page once more through app.py, as every browser run is (after ``switch_page``
    AppTest runs the page alone: no sidebar, whatever app.py would draw)."""
    at.session_state["_app_frame"] = False   # ui.internals.ensure_app_frame reruns via app.py
    at.run()
    assert at.session_state["_app_frame"] and not at.exception


# --------------------------------------------------------------------------- the student
@pytest.mark.parametrize("lang", LANGS)
def test_banner_names_only_locks_and_the_class_preset_brings_the_values_back(classroom, lang):
    t = i18n.translator(lang)
    code = classroom.create_class(TEACHER, "Period 3").code
    push(classroom, code, ["epochs"], epochs=3, lr=0.01, train_subset=300)
    sid = joined(classroom, lang, "Ana", code)
    at = open_app(lang, sid, page="pages/train.py")
    [banner] = [b for b in texts(at, "info") if t("classroom.banner.class", title="Period 3",
                                                   nickname="Ana") in b]
    assert t("classroom.banner.locked", knobs=t("common.epochs")) in banner
    # the pushed but unlocked knobs are not called the instructor's
    for name in ("lr", "momentum", "batch_size", "train_subset", "pipeline", "seed"):
        assert t(f"common.{name}") not in banner
    assert at.button(key="train_preset_class").label == t("train.preset_class")
    assert at.button(key="train_preset_class").proto.type == "primary"   # the class's values now
    assert at.number_input(key="train_train_subset").value == 300

    # another preset: its values, but the locked epochs stay the class's, and the page says so
    at.button(key="train_preset_quick").click().run()   # one epoch, 5,000 images
    assert at.number_input(key="train_epochs").value == 3
    assert at.number_input(key="train_train_subset").value == 5000
    assert at.text_input(key="train_lr").value == i18n.number(0.001, lang)
    assert t("train.preset_kept", knobs=t("common.epochs")) in texts(at, "info")
    assert at.button(key="train_preset_class").proto.type == "secondary"
    # and the class preset brings the class's values back
    at.button(key="train_preset_class").click().run()
    assert at.number_input(key="train_train_subset").value == 300
    assert at.text_input(key="train_lr").value == i18n.number(0.01, lang)
    assert at.button(key="train_preset_class").proto.type == "primary"
    assert not at.exception


@pytest.mark.parametrize("lang", LANGS)
def test_a_refusal_comes_beside_train(classroom, lang):
    t = i18n.translator(lang)
    code = classroom.create_class(TEACHER, "Period 3").code
    push(classroom, code, [], epochs=2, train_subset=300)
    classroom.open_challenge(TEACHER, code, {"kind": "best_accuracy", "max_epochs": 1})
    sid = joined(classroom, lang, "Ana", code)
    at = open_app(lang, sid, page="pages/train.py")
    at.button(key="train_start").click().run()
    refusal = i18n.t("errors.class.challenge_epochs", lang, n=1)
    [error] = [e for e in at.error if e.value == refusal]
    order = in_order(at)
    start = next(i for i, e in enumerate(order) if getattr(e, "key", None) == "train_start")
    epochs = next(i for i, e in enumerate(order) if getattr(e, "key", None) == "train_epochs")
    where = next(i for i, e in enumerate(order) if e is error)
    # right under the button (past the estimate's one line), not under the epochs box above
    assert epochs < start < where and len([e for e in order[start + 1:where]
                                           if e.type not in ("flex_container", "vertical")]) <= 2
    assert jobs.get_queue().runs(sid) == []
    assert t("train.preset_class") == at.button(key="train_preset_class").label
    assert not at.exception


# ------------------------------------------------------------------------ the instructor
@pytest.mark.parametrize("lang", LANGS)
def test_the_preset_form_gives_values_in_words_and_a_locked_seed_warns(classroom, lang):
    t = i18n.translator(lang)
    code = classroom.create_class(TEACHER, "Period 3").code
    push(classroom, code, ["epochs"], epochs=1)
    at = open_app(lang, f"teacher-{lang}-words", instructor=True, page="pages/classroom.py")
    tab(at, lang, "classroom.preset.title")
    for name, raw in [("pipeline", "tutorial"), ("augment", "none"), ("schedule", "constant")]:
        box = at.radio(key=f"cls_p_{name}")   # labels that wrap: never cut
        assert box.value == raw and t(f"common.{name}_{raw}") in box.options
        assert raw not in box.options and not any(o.startswith("common.") for o in box.options)
    assert t("classroom.preset.seed_note") in texts(at, "caption")
    sid = joined(classroom, lang, "Ana", code)
    mine = classroom.student_view(student(sid)).seed
    assert mine not in (None, 0)

    # the instructor locks the seed (the caption above says what that does): the class's seed
    at.checkbox(key="cls_l_seed").check()
    at.button(key="cls_push_btn").click().run()
    assert "seed" in classroom.get_class(TEACHER, code).locked
    assert classroom.student_view(student(sid)).seed is None
    assert not at.exception


@pytest.mark.parametrize("lang", LANGS)
def test_a_tie_shares_its_place_on_the_leaderboard(classroom, lang):
    t = i18n.translator(lang)
    code = classroom.create_class(TEACHER, "Period 3").code
    people = {n: student(joined(classroom, lang, n, code)) for n in ("Ana", "Ben", "Cal")}
    classroom.open_challenge(TEACHER, code, {"kind": "best_accuracy"})
    store = jobs.get_queue().store
    base = 2_000_000_000.0
    for i, (name, acc) in enumerate([("Ana", 0.55), ("Ben", 0.55), ("Cal", 0.40)]):
        finished(store, code, people[name], acc, acc, finished_at=base + i)
    at = open_app(lang, f"teacher-{lang}-ties", instructor=True, page="pages/classroom.py")
    tab(at, lang, "classroom.challenge.title")
    [table] = at.table
    board = table.value
    assert list(board[t("classroom.challenge.rank")]) == ["1", "1", "3"]
    assert list(board[t("classroom.board.nickname")]) == ["Ana", "Ben", "Cal"]
    assert not at.exception


# ------------------------------------------------------------------------ the projector
@pytest.mark.parametrize("lang", LANGS)
def test_the_presenter_view_is_for_a_projector(classroom, lang):
    t = i18n.translator(lang)
    code = classroom.create_class(TEACHER, "Period 3").code
    ana = student(joined(classroom, lang, "Ana", code))
    classroom.open_challenge(TEACHER, code, {"kind": "best_accuracy"})
    run = finished(jobs.get_queue().store, code, ana, 0.5, 0.5, finished_at=2_000_000_000.0)
    store = jobs.get_queue().store
    store.record(run, steps=range(1, 401), losses=[2.3 - i / 1000 for i in range(400)],
                 events=[("start", {"steps_per_epoch": 400, "total_steps": 400}),
                         ("running_loss", {"epoch": 1, "i": 200, "loss": 2.2})])
    classroom.pin(TEACHER, code, run)
    sid = f"teacher-{lang}-presenter"
    at = open_app(lang, sid, instructor=True, page="pages/classroom.py")
    at.button(key="cls_presenter_open").click().run()
    assert at.query_params.get("view") == "presenter"
    through_app(at)

    # nothing personal: no sidebar (no personal link, no sign-out, no navigation), no sid
    assert not at.sidebar.children
    assert t("sidebar.your_link") not in texts(at, "caption")
    assert "identity_sign_out" not in [b.key for b in at.button]
    assert "sid" not in at.query_params
    assert not any(sid in str(e.value) for kind in ("markdown", "caption", "code", "text")
                   for e in getattr(at, kind))
    # the class code large, and the join link as a QR code, for latecomers
    assert f"# {code}" in texts(at, "markdown")
    [qr] = at.image
    assert qr.captions == [t("classroom.presenter.scan")]
    # the pinned run: its running loss (the tutorial's lines, means of k steps), not each step
    chart = at.get("plotly_chart")
    assert len(chart) == 1
    caption = train_live.chart_texts(RunView(), 2000, lang)[0]   # the Train page's chart's
    assert caption in texts(at, "caption")
    assert at.segmented_control(key="cls_pv_show").value == "run"
    # the board, as a projector shows it
    at.segmented_control(key="cls_pv_show").set_value("board").run()
    [board] = at.table
    assert list(board.value[t("classroom.board.nickname")]) == ["Ana"]
    assert list(board.value[t("classroom.board.accuracy")]) == [i18n.percent(0.5, lang, 1)]
    # the leaderboard
    at.segmented_control(key="cls_pv_show").set_value("leaders").run()
    [leaders] = at.table
    assert list(leaders.value[t("classroom.challenge.rank")]) == ["1"]
    assert not at.sidebar.children and not at.exception
    # back to the console: the sidebar is back, with the language and the personal link
    at.button(key="cls_pv_back").click().run()
    through_app(at)
    assert "view" not in at.query_params and at.query_params["sid"] == sid
    assert t("sidebar.your_link") in [c.value for c in at.sidebar.caption]
    assert not at.exception
