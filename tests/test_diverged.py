"""A loss that stops being a number (a learning rate far too high) stops the run at once and
says why: the loop stops at the first flush that reads it back, no evaluation of a broken
network, a "diverged" event; a queued run ends "failed" with the reason in each language and
its partial losses kept; the command line says it and exits 1."""
from __future__ import annotations

import math


from cifarlab import i18n
from cifarlab.core.config import TrainConfig
from cifarlab.core.data import CifarData
from data_support import random_data
from cifarlab.core.train import train
from cifarlab.serve.store import RunStore
from cifarlab.serve.worker import JobContext, run_job, run_train_job

TOO_HIGH = TrainConfig(epochs=3, batch_size=4, num_workers=0, pipeline="fast", lr=10.0)


def tiny_data(n: int = 96) -> CifarData:
    return random_data(n, seed=7)


def test_a_loss_that_is_no_number_stops_the_run_there():
    events = []
    result = train(TOO_HIGH, tiny_data(), on_event=events.append)
    total = 3 * 96 // 4
    assert result.diverged is not None and result.steps < total
    step = result.diverged["step"]
    assert not math.isfinite(result.losses[step - 1])          # the step it names
    assert all(math.isfinite(v) for v in result.losses[:step - 1])
    assert result.eval is None                                  # no accuracy of a broken net
    kinds = [e.kind for e in events]
    assert kinds.count("diverged") == 1 and kinds[-1] == "done" and "eval" not in kinds
    assert not result.epochs[-1]["complete"] and len(result.epochs) == 1
    assert result.summary()["diverged"] == result.diverged


def test_the_tutorials_learning_rate_trains_on():
    result = train(TOO_HIGH.__class__(epochs=1, batch_size=4, num_workers=0, pipeline="fast"),
                   tiny_data())
    assert result.diverged is None and result.eval is not None and result.steps == 24


def test_a_queued_run_that_diverges_fails_with_the_reason_in_each_language(tmp_path):
    store = RunStore(tmp_path / "home" / "runs.db")
    run_id = store.create_run("diverged-session", "train", TOO_HIGH.to_dict(), "cpu")
    store.set_status(run_id, "running")
    status, fields = run_job(run_train_job, TOO_HIGH.to_dict(),
                             JobContext(store, run_id, "cpu", data=tiny_data()))
    assert store.set_status(run_id, status, only_from=["running"], **fields)
    run = store.get(run_id)
    assert run.status == "failed" and run.error_code == "train.diverged"
    step = run.result["diverged"]["step"]
    assert store.loss_count(run_id) >= step                    # the curve up to it is kept
    for lang in ("en", "es", "pt"):
        text = i18n.t("errors.train.diverged", lang, **run.error_params)
        assert i18n.number(step, lang) in text and "nan" in text and "{" not in text


def test_the_command_line_says_so_and_exits_1(tiny_folder, capsys):
    from cifarlab.cli import main

    code = main(["train", "--data", str(tiny_folder), "--epochs", "3", "--batch-size", "4",
                 "--lr", "10", "--num-workers", "0"])
    printed = capsys.readouterr()
    assert code == 1 and "Finished Training" not in printed.out
    assert printed.err.strip().splitlines()[-1].startswith("error: The loss became nan at step")
