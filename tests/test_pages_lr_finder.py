"""The Train page's learning-rate finder through the real entry point (app.py), in English,
Spanish and Portuguese: bad boxes are refused beside them and the button waits; a sweep runs
as a queued job (in a thread of the test process: tests/inline_executor.py) on the form's
settings; its curve, its words and the suggestion appear, and one click puts the suggestion
into the form's learning rate; a class's lock on the lr disables that button, saying why; the
lesson is there."""
from __future__ import annotations

import pytest
import torch

from cifarlab import i18n
from cifarlab.core import lr_finder
from cifarlab.core.config import TrainConfig
from cifarlab.lab import train_lr_finder as finder
from data_support import pages_queue
from test_pages_class_preset import classroom, joined, push  # noqa: F401 - a fixture
from test_pages_classroom import TEACHER, _stop_queue, open_app, texts
from synthetic_run import running_row

LANGS = list(i18n.LANGUAGES)
QUICK = {"train_train_subset": 256, "train_batch_size": 32, "train_epochs": 1}


@pytest.fixture
def queue(tmp_path, monkeypatch, cifar_archive, cifar_cache_dir):
    monkeypatch.delenv("CIFARLAB_CONFIG", raising=False)
    _stop_queue()
    before = torch.get_num_threads()
    torch.set_num_threads(1)   # the sweep's thread trains as a worker does (worker_threads)
    yield pages_queue(monkeypatch, tmp_path / "home", cifar_archive, cifar_cache_dir)
    torch.set_num_threads(before)
    _stop_queue()


@pytest.mark.parametrize("lang", LANGS)
def test_the_finder_refuses_bad_boxes_sweeps_and_its_suggestion_fills_the_form(queue, lang):
    t, sid = i18n.translator(lang), f"finder-{lang}-session"
    at = open_app(lang, sid, page="pages/train.py")
    labels = [e.label for e in at.expander]
    assert t("train.lr_find.title") in labels
    assert t("lesson.title") + ": " + t("train.lr_find.lesson") in labels
    heading = i18n.lesson("lr_finder", lang).splitlines()[0]
    assert any(m.value.startswith(heading) for m in at.markdown)
    start = lambda: at.button(key="train_lrf_start")  # noqa: E731
    assert at.text_input(key="train_lrf_lo").value == i18n.number(lr_finder.LR_MIN, lang)
    assert not start().disabled

    at.number_input(key="train_lrf_steps").set_value(5).run()
    assert i18n.t("errors.lr_find.steps", lang, lo=10, hi=200) in texts(at, "error")
    assert start().disabled
    at.number_input(key="train_lrf_steps").set_value(20).run()
    for lo in ("abc", i18n.number(20.0, lang)):   # no number; above the end
        at.text_input(key="train_lrf_lo").set_value(lo).run()
        assert i18n.t("errors.lr_find.range", lang, hi=10.0) in texts(at, "error")
        assert start().disabled and not queue.runs(sid, kind="lr_find")
    at.text_input(key="train_lrf_lo").set_value(i18n.number(0.0001, lang))
    for key, value in QUICK.items():
        at.number_input(key=key).set_value(value)
    at.radio(key="train_pipeline").set_value("fast")
    at.run()
    assert not texts(at, "error") and not start().disabled

    start().click().run()
    [run] = queue.runs(sid, kind="lr_find")
    assert run.config["steps"] == 20 and run.config["lr_min"] == pytest.approx(1e-4)
    assert run.config["config"]["batch_size"] == 32 and run.config["config"]["lr"] == 0.001
    assert queue.wait(run.id, timeout=300).status == "done"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    result = queue.get(sid, run.id).result
    lr = float(f"{result['suggestion']:.2g}")
    assert len(at.get("plotly_chart")) >= 1
    for line in finder.summary(result, lang):
        assert line in [m.value for m in at.markdown]
    use = at.button(key="train_lrf_use")
    assert use.label == t("train.lr_find.use", lr=i18n.number(lr, lang)) and not use.disabled
    use.click().run()
    assert at.text_input(key="train_lr").value == i18n.number(lr, lang)
    assert t("train.lr_find.used", lr=i18n.number(lr, lang)) in texts(at, "success")
    assert not at.exception


def _finished_sweep(store, sid: str) -> str:
    """A sweep as a worker leaves it in the store (its curve: flat, falling, exploding)."""
    n = 40
    lrs = [lr_finder.lr_at(i, n, 1e-4, 10.0) for i in range(n)]
    loss = [2.3 - 0.02 * max(0, i - 10) + (0.3 * (i - 30) ** 2 if i > 30 else 0)
            for i in range(n)]
    suggestion, rule = lr_finder.suggest(lrs, loss)
    payload = {"config": TrainConfig().to_dict(), "steps": n, "lr_min": 1e-4, "lr_max": 10.0}
    run_id = running_row(store, sid, payload, kind="lr_find")
    store.set_status(run_id, "done", result={
        "lrs": lrs, "losses": loss, "smoothed": loss, "stop": "exploded", "steps": n,
        "suggestion": suggestion, "rule": rule, "lr_at_min": lrs[loss.index(min(loss))],
        "lr_max": 10.0})
    return run_id


@pytest.mark.parametrize("lang", LANGS)
def test_a_class_lock_on_the_lr_disables_the_suggestion_saying_why(classroom, lang):  # noqa: F811
    t = i18n.translator(lang)
    code = classroom.create_class(TEACHER, "Period 3").code
    push(classroom, code, ["lr"], lr=0.01)
    sid = joined(classroom, lang, "Ana", code)
    _finished_sweep(classroom.store, sid)
    at = open_app(lang, sid, page="pages/train.py")
    use = at.button(key="train_lrf_use")
    reason = i18n.t("errors.class.locked_reason", lang, title="Period 3")
    assert use.disabled and t("train.lr_find.locked", reason=reason) in [
        c.value for c in at.caption]
    assert at.text_input(key="train_lr").value == i18n.number(0.01, lang)
