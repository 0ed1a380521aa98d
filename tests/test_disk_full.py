"""A full disk never eats a result.

- Before a run is queued, the server checks it has room for the run's checkpoint and records
  (plus a margin), and refuses it in the student's language otherwise.
- A run that finishes on a full disk keeps its results (accuracy, per class, losses) in the run
  store; only its weights are lost, and it ends saying "the server's disk is full" (with the
  checkpoint's path in the host's log). Before, it ended `failed` with torch's
  "unexpected pos 15232 vs 15184" and no result.
- A write to the run store on a full disk is our error, not `sqlite3.OperationalError`.

ENOSPC is injected at the write layer (``os.fsync`` of the checkpoint's file); a real 2 MB tmpfs
repeats it where this test may mount one (as root), and is skipped cleanly elsewhere.
"""
from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from cifarlab import i18n
from cifarlab.core import checkpoint as ckpt
from cifarlab.core.config import CIFAR10_CLASSES, TrainConfig
from cifarlab.core.data import CifarData
from data_support import random_data
from cifarlab.core.model import Net
from cifarlab.core.train import train
from cifarlab.errors import CheckpointError, JobError
from cifarlab.serve import disk
from cifarlab.serve.queue import JobQueue
from cifarlab.serve.settings import load_settings
from cifarlab.serve.store import RunStore
from cifarlab.serve.worker import JobContext, run_job, run_train_job

SESSION = "disk-full-session"
CONFIG = TrainConfig(epochs=1, batch_size=16, num_workers=0, pipeline="fast", lr=0.01)


def tiny_data(n: int = 96) -> CifarData:
    return random_data(n, seed=7)


@pytest.fixture
def enospc_on(monkeypatch):
    """Files under ``folder`` fail as on a full disk: ENOSPC when their data is flushed to the
    disk (``os.fsync``, where a file system with delayed allocation reports it); every other
    file is written as usual (the run store keeps working)."""
    def arm(folder: Path):
        real_fsync = os.fsync
        folder = str(Path(folder).resolve())

        def fsync(fd):
            fd = fd if isinstance(fd, int) else fd.fileno()
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                target = ""
            if target.startswith(folder):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real_fsync(fd)

        monkeypatch.setattr(os, "fsync", fsync)
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc/self/fd to tell which file is written")
    return arm


# ------------------------------------------------------------------------ the checkpoint file

def test_a_checkpoint_on_a_full_disk_is_our_error_and_leaves_nothing(tmp_path, enospc_on):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    enospc_on(folder)
    with pytest.raises(CheckpointError) as info:
        ckpt.save(folder / "run.pth", Net(), TrainConfig(), CIFAR10_CLASSES, {"a": 1})
    assert info.value.code == "checkpoint.disk_full"
    assert info.value.params["path"] == str(folder / "run.pth")   # for the host's log
    for lang in i18n.LANGUAGES:
        assert "run.pth" in info.value.text(lang)
    assert "unexpected pos" not in str(info.value) and "RuntimeError" not in str(info.value)
    assert list(folder.iterdir()) == []   # no temp file left behind, no torn file


def test_training_keeps_its_results_when_its_checkpoint_cannot_be_written(tmp_path, enospc_on):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    enospc_on(folder)
    events = []
    result = train(CONFIG, tiny_data(), on_event=events.append,
                   checkpoint_path=folder / "run.pth")
    assert result.checkpoint is None and result.checkpoint_error.code == "checkpoint.disk_full"
    assert result.eval is not None and 0.0 <= result.eval.accuracy <= 1.0
    assert len(result.losses) == result.steps == 6
    assert [e.kind for e in events][-1] == "done"
    assert list(folder.iterdir()) == []


def test_the_command_line_prints_the_results_then_says_the_disk_is_full(tiny_folder, tmp_path,
                                                                        enospc_on, capsys):
    from cifarlab.cli import EXIT_BAD_INPUT, main

    out = tmp_path / "out"
    out.mkdir()
    enospc_on(out)
    code = main(["train", "--data", str(tiny_folder), "--epochs", "1", "--batch-size", "4",
                 "--out", str(out / "net.pth")])
    printed = capsys.readouterr()
    assert code == EXIT_BAD_INPUT
    assert "Accuracy of the network" in printed.out   # the results, then why no weights
    assert printed.err.strip().splitlines()[-1] == "error: The disk is full: 'net.pth' could " \
        "not be saved (nothing was written)."
    assert "Traceback" not in printed.err and list(out.iterdir()) == []


# --------------------------------------------------------------------------- a worker's run

def test_a_run_finishing_on_a_full_disk_keeps_its_results(tmp_path, enospc_on, capfd):
    store = RunStore(tmp_path / "home" / "runs.db")
    run_id = store.create_run(SESSION, "train", CONFIG.to_dict(), "cpu")
    store.set_status(run_id, "running")
    enospc_on(store.checkpoint_dir)   # the weights' disk is full, the store's has room
    ctx = JobContext(store, run_id, "cpu", data=tiny_data())
    status, fields = run_job(run_train_job, CONFIG.to_dict(), ctx)
    assert store.set_status(run_id, status, only_from=["running"], **fields)

    run = store.get(run_id)
    assert run.status == "failed" and run.error_code == "serve.worker.disk_full"
    assert run.checkpoint is None and not store.checkpoint_path(run_id).exists()
    # the results are all there: accuracy, per class, the step losses
    assert run.result["test_accuracy"] is not None
    assert sorted(run.result["per_class_accuracy"]) == sorted(CIFAR10_CLASSES)
    assert store.loss_count(run_id) == 6
    assert [e.kind for e in store.events(run_id, kinds=["eval"])] == ["eval"]
    # the student reads it in their language; the host's log has the checkpoint's path
    for lang in i18n.LANGUAGES:
        assert run.error_text(lang) == i18n.t("errors.serve.worker.disk_full", lang)
    assert "disk is full" in run.error_text("en") and "disco" in run.error_text("es")
    err = capfd.readouterr().err
    assert "disk is full" in err and str(store.checkpoint_path(run_id)) in err
    assert "unexpected pos" not in (run.error or "")


# ------------------------------------------------------------------------- before a run starts

def test_a_run_is_refused_at_submit_when_the_disk_has_no_room(tmp_path, monkeypatch, caplog):
    settings = load_settings(home=tmp_path / "home", spare_workers=0)
    queue = JobQueue(settings=settings, start=False)
    try:
        need = disk.run_bytes(CONFIG)
        weights = ckpt.network_params(CONFIG, 10) * 4
        assert need >= weights + disk.MARGIN_BYTES
        monkeypatch.setattr(disk, "free_bytes", lambda folder: 350_000)   # the hostile test's
        with caplog.at_level(logging.ERROR, logger="cifarlab.serve.disk"):
            with pytest.raises(JobError) as info:
                queue.submit(SESSION, CONFIG)
        assert info.value.code == "serve.store.no_room"
        assert "0,4 MB" in info.value.text("es") and "0.4 MB" in info.value.text("en")
        assert str(queue.store.checkpoint_dir) in caplog.text   # the host learns where
        assert queue.store.list_runs() == []                     # nothing queued
        monkeypatch.setattr(disk, "free_bytes", lambda folder: need)
        assert queue.submit(SESSION, CONFIG)                     # room again: queued
    finally:
        queue.shutdown(timeout=2)


def test_free_bytes_looks_at_the_nearest_folder_that_exists(tmp_path):
    assert disk.free_bytes(tmp_path / "not" / "yet") == shutil.disk_usage(tmp_path).free


# ------------------------------------------------------------ a real full disk (tmpfs), as root

@pytest.fixture
def small_disk(tmp_path):
    """A 2 MB tmpfs at tmp_path/disk, unmounted afterwards; skipped where mounting is not
    allowed (not root, no tmpfs)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _fill(folder: Path, leave: int = 0) -> None:
    """Fill the disk of ``folder`` to ``leave`` bytes or fewer."""
    with open(folder / f"filler-{uuid.uuid4().hex}", "wb", buffering=0) as f:
        chunk = b"\0" * 65536
        while shutil.disk_usage(folder).free > leave + len(chunk):
            f.write(chunk)
        try:
            while shutil.disk_usage(folder).free > leave:
                f.write(b"\0" * 4096)
        except OSError:
            pass


def test_on_a_real_full_disk(small_disk, tmp_path, caplog):
    # the run store on the full disk: creating a run is our error, nothing half-written
    store = RunStore(small_disk / "runs.db")
    first = store.create_run(SESSION, "train", CONFIG.to_dict(), "cpu")
    _fill(small_disk)
    with caplog.at_level(logging.ERROR, logger="cifarlab.serve.disk"):
        with pytest.raises(JobError) as info:
            for _ in range(200):   # SQLite may still fit a row or two into a page it has
                store.create_run(SESSION, "train", {"pad": "x" * 4000}, "cpu")
    assert info.value.code == "serve.store.disk_full"
    assert "disco" in info.value.text("es") and str(store.path) in caplog.text
    assert store.get(first).status == "queued"   # what was there is still there
    assert store.counts()["queued"] >= 1
    # a checkpoint on the full disk: our error, no torn file
    with pytest.raises(CheckpointError) as info:
        ckpt.save(small_disk / "checkpoints" / "x.pth", Net(), TrainConfig(), CIFAR10_CLASSES)
    assert info.value.code == "checkpoint.disk_full"
    assert not list((small_disk / "checkpoints").glob("*.pth"))
    # a run whose store has room but whose checkpoint folder is on the full disk keeps its
    # results
    other = RunStore(tmp_path / "home" / "runs.db", checkpoint_dir=small_disk / "checkpoints")
    run_id = other.create_run(SESSION, "train", CONFIG.to_dict(), "cpu")
    other.set_status(run_id, "running")
    status, fields = run_job(run_train_job, CONFIG.to_dict(),
                             JobContext(other, run_id, "cpu", data=tiny_data()))
    other.set_status(run_id, status, only_from=["running"], **fields)
    run = other.get(run_id)
    assert run.status == "failed" and run.error_code == "serve.worker.disk_full"
    assert run.result["test_accuracy"] is not None and other.loss_count(run_id) == 6
