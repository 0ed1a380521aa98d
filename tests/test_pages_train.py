"""The Train page through the real entry point (app.py): renders in three languages, shows bad
values next to their widgets without submitting, trains a tiny run (in a thread of the test
process: tests/inline_executor.py; the browser tests train in worker processes) and shows its
accuracy, keeps runs private to their session, finds a run again from a second tab,
says "you already have N runs" instead of hanging, and cancels a run keeping a partial result.

Each test gets its own CIFARLAB_HOME (a fresh run store); the decoded data set is shared through
CIFARLAB_CACHE, so the runs only memory-map it.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cifarlab import i18n
from cifarlab.serve import queue as jobs
from cifarlab.serve.store import RunStore
from inline_executor import use_inline_executor

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
QUICK = {"train_train_subset": 256, "train_batch_size": 32, "train_epochs": 1}


def _stop_queue() -> None:
    if jobs._QUEUE is not None:
        jobs._QUEUE.shutdown(timeout=5)
        jobs._QUEUE = None


@pytest.fixture
def lab(tmp_path, monkeypatch, cifar_archive, cifar_data, cifar_cache_dir):
    """A fresh home for the run store; the page's queue singleton is rebuilt from this env."""
    from ui import nav

    home = tmp_path / "home"
    monkeypatch.setenv("CIFARLAB_HOME", str(home))
    monkeypatch.setenv("CIFARLAB_DATA", str(cifar_archive))
    monkeypatch.setenv("CIFARLAB_CACHE", str(cifar_cache_dir))
    monkeypatch.setenv("CIFARLAB_SPARE_WORKERS", "0")
    monkeypatch.delenv("CIFARLAB_CONFIG", raising=False)
    # While other pages are still being written, navigate only over those that exist.
    monkeypatch.setattr(nav, "PAGES", [p for p in nav.PAGES if (ROOT / p[1]).is_file()])
    use_inline_executor(monkeypatch)
    _stop_queue()  # the page's cached queue sees it closed and takes a new one
    yield home
    _stop_queue()


def open_train(sid: str, lang: str = "en") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)   # hang guards, not speed bounds
    at.query_params["lang"] = lang
    at.query_params["sid"] = sid
    at.run()
    at.switch_page("pages/train.py")
    at.run()
    assert not at.exception, at.exception
    return at


def store(home: Path) -> RunStore:
    return RunStore(home / "runs.db", home / "checkpoints")


def texts(at: AppTest, kind: str) -> list[str]:
    return [e.value for e in getattr(at, kind)]


def set_knobs(at: AppTest, **values) -> AppTest:
    for key, value in values.items():
        if key == "train_pipeline":
            at.radio(key=key).set_value(value)
        elif key in ("train_lr", "train_momentum"):       # decimals: text boxes
            at.text_input(key=key).set_value(str(value))
        else:
            at.number_input(key=key).set_value(value)
    return at.run()


def wait_for(predicate, timeout=60.0, poll=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout} s")


def layout(at: AppTest) -> list[tuple[str, str, tuple[str, ...]]]:
    """Everything on the page in its order: (type, key or label, the expanders around it)."""
    out: list[tuple[str, str, tuple[str, ...]]] = []

    def walk(node, around: tuple[str, ...]) -> None:
        children = getattr(node, "children", None) or {}
        for i in sorted(children):
            child = children[i]
            name = (child.label if child.type == "expander" else
                    getattr(child, "key", None) or getattr(child, "label", None) or "")
            out.append((child.type, name, around))
            walk(child, around + ((child.label,) if child.type == "expander" else ()))

    walk(at.main, ())
    return out


def expander(at: AppTest, label: str):
    (found,) = [e for e in at.expander if e.label == label]
    return found


def preset_rows(at: AppTest) -> list[int]:
    """The number of columns in each row of preset buttons."""
    rows: list[int] = []

    def walk(node) -> None:
        kids = [node.children[i] for i in sorted(getattr(node, "children", None) or {})]
        if kids and all(k.type == "column" for k in kids) and any(
                (getattr(e, "key", None) or "").startswith("train_preset_")
                for k in kids for e in k.children.values()):
            rows.append(len(kids))
        for k in kids:
            walk(k)

    walk(at.main)
    return rows


TUTORIAL_SIX = ("epochs", "lr", "momentum", "batch_size", "num_workers", "device")


@pytest.mark.parametrize("lang", ["en", "es", "pt"])
def test_a_beginner_meets_the_tutorials_knobs_train_and_the_lesson_first(lab, lang):
    """17 settings stood before Train: now the tutorial's six and Train come first, the rest in
    an Advanced section closed while it holds nothing but the tutorial's values; the lesson is
    open on the session's first visit; the preset labels wrap, three a row, never cut."""
    t = i18n.translator(lang)
    at = open_train(f"beginner-{lang}-session", lang)
    advanced, lesson = t("train.advanced"), t("lesson.title") + ": " + t("nav.train")
    items = layout(at)
    where = {name: i for i, (_, name, _) in enumerate(items)}
    section = where[advanced]
    assert all(where["train_" + name] < section for name in TUTORIAL_SIX)
    assert where["train_start"] < section
    inside = {name for _, name, around in items if advanced in around}
    assert {"train_pipeline", "train_train_subset", "train_seed", "train_net", "train_nesterov",
            "train_weight_decay", "train_label_smoothing", "train_tta"} <= inside
    assert not inside & {"train_" + name for name in TUTORIAL_SIX} and "train_start" not in inside
    assert not expander(at, advanced).proto.expanded
    assert expander(at, lesson).proto.expanded            # the first visit: the lesson is open
    assert [c for c in texts(at, "caption") if c == t("train.advanced_help")]
    # the presets: three a row, labels whole (they wrap instead of ending in "…")
    assert preset_rows(at) == [3, 3]
    presets = [b for b in at.button if b.key.startswith("train_preset_")]
    assert len(presets) == 6
    for b in presets:
        assert b.label == t("train." + b.key.removeprefix("train_")) and b.proto.wrap
    # an advanced knob set: the section opens, and does not close under the student's hands
    at.toggle(key="train_nesterov").set_value(True).run()
    assert expander(at, advanced).proto.expanded
    at.toggle(key="train_nesterov").set_value(False).run()
    assert expander(at, advanced).proto.expanded
    assert expander(at, lesson).proto.expanded
    # a later visit: the lesson closed, the section as its knobs say
    at.switch_page("pages/loss.py")
    at.run()
    at.switch_page("pages/train.py")
    at.run()
    assert not expander(at, lesson).proto.expanded
    assert not expander(at, advanced).proto.expanded
    # a preset that sets an advanced knob shows it
    at.button(key="train_preset_quick").click().run()
    assert expander(at, advanced).proto.expanded
    assert at.number_input(key="train_train_subset").value == 5000
    assert not at.exception


@pytest.mark.parametrize("lang", ["en", "es", "pt"])
def test_renders_in_each_language(lab, lang):
    t = i18n.translator(lang)
    at = open_train(f"render-{lang}-session", lang)
    assert at.title[0].value == t("nav.train")
    assert at.button(key="train_start").label == t("train.start")
    assert at.number_input(key="train_epochs").label == t("common.epochs")
    # the tutorial as written, with the server's limit as the epochs widget's max
    assert at.button(key="train_preset_tutorial").proto.type == "primary"   # the current one
    assert at.number_input(key="train_epochs").value == 2
    assert at.number_input(key="train_batch_size").value == 4
    assert t("train.no_run") in texts(at, "info")
    assert not at.error
    # a preset fills the knobs in
    at.button(key="train_preset_quick").click().run()
    assert at.number_input(key="train_train_subset").value == 5000
    assert at.number_input(key="train_epochs").value == 1
    assert at.button(key="train_preset_quick").proto.type == "primary"
    # changing a knob makes it "custom", and no later rerun re-applies a preset
    at.text_input(key="train_lr").set_value("0.05").run()
    assert all(b.proto.type != "primary" for b in at.button if b.key.startswith("train_preset_"))
    assert t("train.custom") in [c.value for c in at.caption]
    at.run()
    assert at.text_input(key="train_lr").value == "0.05"
    # beyond the server's limit: our message in this language, the value kept as typed
    at.number_input(key="train_epochs").set_value(30).run()
    assert at.number_input(key="train_epochs").value == 30
    assert t("errors.config.epochs_limit", n=20) in texts(at, "error")
    assert not at.exception


def test_a_server_allowing_fewer_images_opens_with_a_form_that_fits(lab, monkeypatch):
    """The tutorial asks for every image: on a server that allows fewer, its preset is fitted
    to the limit (the page opened with an error beside the preset's own value)."""
    monkeypatch.setenv("CIFARLAB_MAX_TRAIN_IMAGES", "20000")
    at = open_train("fewer-images-session", "es")
    assert not at.error, texts(at, "error")
    assert at.number_input(key="train_train_subset").value == 20000
    assert at.button(key="train_preset_tutorial").proto.type == "primary"
    # the server's own limit is no change of the student's: the Advanced section stays closed
    assert not expander(at, i18n.t("train.advanced", "es")).proto.expanded


def test_typed_values_outlive_a_visit_to_another_page(lab):
    at = open_train("navigating-session", "pt")
    set_knobs(at, train_epochs=5, train_lr="0,05")
    at.switch_page("pages/loss.py")
    at.run()
    at.switch_page("pages/train.py")
    at.run()
    assert at.number_input(key="train_epochs").value == 5
    assert at.text_input(key="train_lr").value == "0,05"


def test_bad_values_show_their_message_and_submit_nothing(lab):
    t = i18n.translator("en")
    at = open_train("bad-values-session")
    set_knobs(at, train_train_subset=32, train_batch_size=64)
    want = t("errors.config.batch_data", batch=64, n=32)
    assert want in texts(at, "error")
    at.text_input(key="train_lr").set_value("0")
    at.text_input(key="train_momentum").set_value("1").run()
    errors = texts(at, "error")
    assert t("errors.config.lr", hi=10, default=0.001) in errors
    assert t("errors.config.momentum", default=0.9) in errors
    at.button(key="train_start").click().run()
    assert not at.exception
    assert t("train.config_errors") in texts(at, "error")
    assert store(lab).list_runs() == []
    # fixed: the messages go away
    set_knobs(at, train_batch_size=8, train_lr=0.001, train_momentum=0.9)
    assert not at.error


@pytest.mark.parametrize("lang, shown", [("es", "0,001"), ("pt", "0,001"), ("en", "0.001")])
def test_decimals_are_written_and_read_in_the_students_notation(lab, lang, shown):
    """A browser's number box turned a Spanish "0,01" into 1 without a word; the learning
    rate and momentum boxes show the language's notation and read both marks."""
    t = i18n.translator(lang)
    at = open_train(f"decimal-session-{lang}", lang=lang)
    assert at.text_input(key="train_lr").value == shown
    set_knobs(at, train_lr="0,01", train_momentum="0.5", train_epochs=1, train_train_subset=64)
    assert not at.error
    at.button(key="train_start").click().run()
    assert not at.exception
    (run,) = store(lab).list_runs()
    assert run.config["lr"] == 0.01 and run.config["momentum"] == 0.5
    # not a number: the config's message in the language, the text kept, nothing submitted
    set_knobs(at, train_lr="0,0,1")
    assert t("errors.config.not_a_number", why=t("errors.config.lr", hi=10, default=0.001)) \
        in texts(at, "error")
    assert at.text_input(key="train_lr").value == "0,0,1"
    at.button(key="train_start").click().run()
    assert len(store(lab).list_runs()) == 1
    # a preset writes its decimals in the language again
    at.button(key="train_preset_tutorial").click().run()
    assert at.text_input(key="train_lr").value == shown


def test_train_a_quick_run_to_the_end(lab):
    t = i18n.translator("en")
    at = open_train("alice-session-1")
    set_knobs(at, train_pipeline="fast", **QUICK)
    # nothing measured on this server yet: no time is promised
    assert t("eta.unknown") in texts(at, "caption")
    at.text_input(key="train_name").input("my first run").run()
    at.button(key="train_start").click().run()
    assert not at.exception
    assert t("train.started") in texts(at, "success")
    at.run()  # the rerun a status change (queued -> running) causes at once keeps the message
    assert t("train.started") in texts(at, "success")
    runs = store(lab).list_runs(session="alice-session-1")
    assert len(runs) == 1 and runs[0].config["train_subset"] == 256
    assert runs[0].config["pipeline"] == "fast"
    assert runs[0].name == "my first run" and at.text_input(key="train_name").value == ""
    run_id = runs[0].id
    assert at.selectbox(key="train_run_select").value == run_id

    done = wait_for(lambda: (r := store(lab).get(run_id)).finished and r, timeout=300)
    assert done.status == "done", done.error
    at.run()
    assert not at.exception
    assert t("train.finished") in texts(at, "success")
    accuracy = [m for m in at.metric if m.label == t("train.accuracy_final")]
    assert accuracy and accuracy[0].value.endswith("%")
    assert f"{100 * done.result['test_accuracy']:.1f}" in accuracy[0].value
    # the epochs as a table that scrolls inside itself (a markdown one widened a phone's page)
    (epochs,) = [tb.value for tb in at.table if t("train.epoch_col") in list(tb.value.columns)]
    assert epochs.iloc[:, 0].tolist() == ["1"]

    # a second tab with the same ?sid= finds it; another session does not see it
    again = open_train("alice-session-1")
    assert again.selectbox(key="train_run_select").value == run_id
    assert [m for m in again.metric if m.label == t("train.accuracy_final")]
    other = open_train("bob-session-22")
    assert t("train.no_run") in texts(other, "info")
    # the same settings now come with a time measured on this server (anyone's run counts)
    set_knobs(other, train_pipeline="fast", **QUICK)
    head = t("eta.history", time="\0", runs="\0").split("\0")[0]
    assert [c for c in texts(other, "caption") if c.startswith(head)], texts(other, "caption")
    assert not [s for s in other.selectbox if s.key == "train_run_select"]


def test_cancel_keeps_a_partial_result_and_limits_are_messages(lab, monkeypatch):
    monkeypatch.setenv("CIFARLAB_MAX_PER_OWNER", "1")
    monkeypatch.setenv("CIFARLAB_CPU_SLOTS", "1")
    t = i18n.translator("en")
    at = open_train("carol-session-3")
    set_knobs(at, train_pipeline="fast", train_train_subset=20000, train_batch_size=4,
              train_epochs=1)
    at.button(key="train_start").click().run()
    run_id = store(lab).list_runs(session="carol-session-3")[0].id
    # a second run is refused with a message, not a hang
    at.button(key="train_start").click().run()
    with pytest.raises(jobs.JobError) as refused:   # the engine's refusal, shown as it words it
        jobs.get_queue().submit("carol-session-3", jobs.TrainConfig(epochs=1),
                                owner="browser:carol-session-3")   # the page's owner id
    assert refused.value.text("en") in texts(at, "error")
    assert len(store(lab).list_runs(session="carol-session-3")) == 1

    # someone else waits behind it and sees their place in the queue; cancelling a queued run
    # is immediate
    wait_for(lambda: store(lab).get(run_id).status == "running", timeout=300)
    dave = open_train("dave-session-4")
    set_knobs(dave, train_pipeline="fast", **QUICK)
    dave.button(key="train_start").click().run()
    dave_run = store(lab).list_runs(session="dave-session-4")[0]
    assert dave_run.status == "queued"  # carol's run holds the only CPU slot
    assert any(t("status.queued", n=1) in m for m in texts(dave, "markdown"))
    dave.button(key="train_cancel").click().run()
    assert store(lab).get(dave_run.id).status == "cancelled"
    # the Stop button's callback runs before the live view draws: the same run shows it
    assert t("train.cancelled_queued") in texts(dave, "warning")
    dave.run()
    assert t("train.cancelled_queued") in texts(dave, "warning")

    wait_for(lambda: store(lab).loss_count(run_id) > 0, timeout=300)
    at.run()
    assert at.button(key="train_cancel").label == t("train.cancel")
    at.button(key="train_cancel").click().run()
    assert not at.exception
    wait_for(lambda: store(lab).get(run_id).status not in ("queued", "running"), timeout=300,
             poll=0.05)
    run = store(lab).get(run_id)
    assert run.status == "cancelled"
    assert run.result["steps"] < 5000 and run.result["test_accuracy"] is not None
    # stopped part-way (the run's own step count says so) and tested what it learned
    at.run()
    assert not at.exception
    assert any(w.startswith("Stopped after") for w in texts(at, "warning"))
    assert [m for m in at.metric if m.label == t("train.accuracy_partial")]


def test_the_live_view_never_reruns_the_whole_page():
    """Status changes are drawn by the live fragment itself: an st.rerun() from inside a
    polling fragment collides with the fragment's own timer (pages froze under load, and the
    server logged thousands of "fragment ... does not exist anymore")."""
    import ast

    tree = ast.parse((ROOT / "pages" / "train.py").read_text(encoding="utf-8"))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute) and node.func.attr in ("rerun", "stop")
             and getattr(node.func.value, "id", None) == "st"]
    assert not calls, [f"line {c.lineno}" for c in calls]
