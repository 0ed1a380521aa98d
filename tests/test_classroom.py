"""The classroom's serving side (cifarlab.serve.classroom): roles, pushed presets and locked knobs
enforced by JobQueue.submit, class limits, stale edits, joining, leaderboards on the two halves
of the test set, CSV, and a restart. No worker process here but in the last test (one tiny run
through the real queue, scored against a direct computation on its checkpoint); finished runs
are written into the store directly where training is not the point."""
from __future__ import annotations

import ast
import csv
import io
import re
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text
import torch

from cifarlab import i18n
from cifarlab.core.config import MAX_SEED, TrainConfig
from cifarlab.core.evaluate import (HALVES_SEED, evaluate, result_from_probabilities,
                                    split_halves)
from cifarlab.core.model import Net
from cifarlab.errors import ConfigError, JobError
from cifarlab.lab.classroom import leader_csv
from cifarlab.lab.train import RunView
from cifarlab.serve.classroom import names, tables
from cifarlab.serve.classroom.facade import Classroom, get_classroom
from cifarlab.serve.classroom.model import ClassError, ClassLimits, Goal
from cifarlab.serve.identity import Person
from cifarlab.serve.queue import JobQueue
from cifarlab.serve.schema import SCHEMA_VERSION
from old_store import old_store, schema_version
from cifarlab.serve.settings import load_settings
from cifarlab.serve.store import RunStore

ROOT = Path(__file__).resolve().parents[1]
QUICK = TrainConfig(epochs=1, train_subset=256, batch_size=32, pipeline="fast", num_workers=0,
                    device="cpu")
TEACH = Person("user:teacher@school.edu", "teacher@school.edu", instructor=True)
TEACH2 = Person("user:other@school.edu", "other@school.edu", instructor=True)
ANA = Person("browser:ana-cookie-1", "Ana")
BEN = Person("browser:ben-cookie-2", "Ben")
CAL = Person("browser:cal-cookie-3", "Cal")
SID = {ANA: "ana-session-1", BEN: "ben-session-2", CAL: "cal-session-3"}


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


@pytest.fixture
def queue(tmp_path):
    """A JobQueue without its scheduler (no worker starts); 50,000 training images assumed."""
    settings = load_settings(env={}, home=str(tmp_path / "home"),
                             data=str(tmp_path / "no-data-here"), max_per_owner=10)
    q = JobQueue(settings=settings, start=False)
    yield q
    q.shutdown()


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def cr(queue, clock):
    return Classroom(queue.store, clock=clock)


@pytest.fixture
def klass(cr):
    """An open class with Ana, Ben and Cal joined."""
    info = cr.create_class(TEACH, "Period 3")
    for p in (ANA, BEN, CAL):
        cr.join(p, info.code, p.name, client_key=p.id)
    return info


def refused(call, *args, **kwargs) -> JobError | ConfigError:
    with pytest.raises((JobError, ConfigError)) as info:
        call(*args, **kwargs)
    return info.value


def finished(store, code, person, public, private, *, seconds=10.0, finished_at=None,
             epochs=1, device="cpu", status="done"):
    """A run of ``person`` in class ``code`` that finished with these half accuracies (its
    ``eval`` event, as a worker writes it)."""
    run_id = store.create_run(SID.get(person, "some-session-9"), "train",
                              QUICK.replace(epochs=epochs).to_dict(), device, owner=person.id)
    tables.record_run(store, code, person.id, run_id)
    store.set_status(run_id, "running")
    store.record(run_id, events=[("eval", {
        "accuracy": (public + private) / 2,
        "half_accuracies": {"public": public, "private": private}})])
    store.set_status(run_id, status, result={"test_accuracy": (public + private) / 2,
                                             "train_seconds": seconds})
    if finished_at is not None:
        with store._write() as c:
            c.execute(text("UPDATE runs SET finished_at = :t WHERE id = :id"),
                  {"t": finished_at, "id": run_id})
    return run_id


# -- roles -----------------------------------------------------------------------------------
def test_a_student_is_refused_every_instructor_action(cr, klass, queue):
    code = klass.code
    run_id = queue.submit(SID[ANA], QUICK, owner=ANA.id)
    calls = [
        lambda p: cr.create_class(p, "Mine now"),
        lambda p: cr.set_open(p, code, False),
        lambda p: cr.my_classes(p),
        lambda p: cr.get_class(p, code),
        lambda p: cr.push_preset(p, code, {"lr": 5.0}, ["lr"], klass.version),
        lambda p: cr.set_limits(p, code, ClassLimits(max_epochs=1), klass.version),
        lambda p: cr.board(p, code),
        lambda p: cr.cancel_run(p, code, run_id),
        lambda p: cr.pin(p, code, run_id),
        lambda p: cr.open_challenge(p, code, Goal("fastest_to", target=0.3)),
        lambda p: cr.close_challenge(p, code),
    ]
    for call in calls:  # a tampered request, not a missing button: the engine says no
        err = refused(call, ANA)
        assert isinstance(err, ClassError) and err.code == "class.not_instructor"
        assert err.text("es") != err.text("en") != err.text("pt")
    info = cr.get_class(TEACH, code)  # and nothing changed
    assert (info.is_open, info.version, info.preset, info.pinned, info.challenge) == \
        (True, 1, {}, None, None)
    assert queue.store.get(run_id).status == "queued"
    assert [c.code for c in cr.my_classes(TEACH)] == [code]
    for bad in (None, "teacher", object()):
        assert refused(cr.my_classes, bad).code == "class.no_person"


def test_students_see_only_their_own_class(cr, klass):
    other = cr.create_class(TEACH, "Period 4")
    cr.open_challenge(TEACH, other.code, Goal("best_accuracy"))
    dora = Person("browser:dora-cookie-4", "Dora")
    for call in (lambda: cr.leaderboard(ANA, other.code), lambda: cr.presenter(ANA, other.code),
                 lambda: cr.leaderboard(dora, klass.code), lambda: cr.presenter(dora)):
        assert refused(call).code == "class.not_member"
    assert cr.presenter(ANA) is None and cr.leaderboard(ANA) == []


# -- presets, locked knobs and limits, enforced by submit -----------------------------------
def test_a_tampered_submit_with_a_locked_knob_is_refused(cr, klass, queue):
    info = cr.push_preset(TEACH, klass.code, {"lr": 0.01, "epochs": 1, "batch_size": 32},
                          locked=["lr", "batch_size", "seed"], expected_version=klass.version)
    assert info.version == 2 and info.locked == ("lr", "batch_size", "seed")
    assert info.preset == {"lr": 0.01, "epochs": 1, "batch_size": 32, "seed": 0}
    view = cr.student_view(ANA)
    assert view.preset == info.preset and view.locked == info.locked
    # the page would have disabled the widget; a tampered browser sends lr = 0.1 anyway
    err = refused(queue.submit, SID[ANA], QUICK.replace(lr=0.1), owner=ANA.id)
    assert isinstance(err, ClassError) and (err.code, err.field) == ("class.knob_locked", "lr")
    assert "0.01" in str(err) and "0,01" in err.text("es") and "0,01" in err.text("pt")
    assert refused(queue.submit, SID[ANA], QUICK.replace(lr=0.01, seed=3),
                   owner=ANA.id).field == "seed"
    # no way around submit's checks: submit_job refuses the "train" kind
    assert refused(queue.submit_job, SID[ANA], "train", QUICK.to_dict(), "cpu",
                   owner=ANA.id).code == "serve.queue.unknown_kind"
    assert queue.store.counts()["queued"] == 0
    # the pushed values pass, and the run is recorded for the class (owner: Person.id)
    run_id = queue.submit(SID[ANA], QUICK.replace(lr=0.01), owner=ANA.id)
    assert tables.class_of_run(queue.store, run_id) == klass.code
    assert queue.store.get(run_id).owner == ANA.id
    # someone in no class is not bound by it
    queue.submit("walk-in-session-1", QUICK.replace(lr=0.1), owner="browser:walk-in")
    assert [r.run_id for r in cr.board(TEACH, klass.code)] == [run_id]


def test_class_limits_are_enforced_on_submit(cr, klass, queue):
    info = cr.set_limits(TEACH, klass.code, ClassLimits(max_epochs=2, max_train_images=1000,
                                                        devices=("cuda",),
                                                        max_runs_per_student=2), klass.version)
    assert info.version == 2 and info.limits.devices == ("cuda",)
    cases = [(QUICK.replace(epochs=3), "class.limit_epochs", "epochs"),
             (QUICK.replace(train_subset=None), "class.limit_images", "train_subset"),
             (QUICK.replace(train_subset=2000), "class.limit_images", "train_subset"),
             (QUICK, "class.limit_device", "device")]
    for config, code, field in cases:
        err = refused(queue.submit, SID[ANA], config, owner=ANA.id)
        assert (err.code, err.field) == (code, field)
        for lang in i18n.LANGUAGES:
            assert "{" not in err.text(lang)
    assert "1,000" in str(refused(queue.submit, SID[ANA], QUICK.replace(train_subset=2000),
                                  owner=ANA.id))
    info = cr.set_limits(TEACH, klass.code, ClassLimits(max_epochs=2, devices=("cpu",),
                                                        max_runs_per_student=2), info.version)
    first = queue.submit(SID[ANA], QUICK, owner=ANA.id)
    queue.submit(SID[ANA], QUICK.replace(epochs=2), owner=ANA.id)
    err = refused(queue.submit, SID[ANA], QUICK, owner=ANA.id)
    assert (err.code, err.params) == ("class.limit_runs", {"n": 2})
    queue.cancel(SID[ANA], first)           # cancelled before it started: it did not count
    queue.submit(SID[ANA], QUICK, owner=ANA.id)
    queue.submit(SID[BEN], QUICK, owner=BEN.id)     # the limit is per student
    # a preset the limits would refuse cannot be pushed, and limits cannot undercut the preset
    err = refused(cr.push_preset, TEACH, klass.code, {"epochs": 5}, [], info.version)
    assert (err.code, err.field) == ("class.limit_epochs", "epochs")
    info = cr.push_preset(TEACH, klass.code, {"epochs": 2}, ["epochs"], info.version)
    assert refused(cr.set_limits, TEACH, klass.code, ClassLimits(max_epochs=1),
                   info.version).field == "epochs"
    for bad in (ClassLimits(max_epochs=0), ClassLimits(devices="cpu"), {"max_epochs": 1}):
        assert refused(cr.set_limits, TEACH, klass.code, bad, info.version).code in (
            "class.bad_limit", "class.bad_limits")


def test_a_bad_preset_names_each_knob(cr, klass):
    err = refused(cr.push_preset, TEACH, klass.code, {"lr": -1, "momentum": 2.0}, [], 1)
    assert isinstance(err, ConfigError) and {p.field for p in err.problems} == {"lr", "momentum"}
    assert refused(cr.push_preset, TEACH, klass.code, {"lr": 0.1}, ["dropout"],
                   1).code == "config.unknown"
    assert cr.get_class(TEACH, klass.code).version == 1


def test_two_instructors_editing_one_class(cr, klass):
    seen1 = cr.get_class(TEACH, klass.code)
    seen2 = cr.get_class(TEACH2, klass.code)
    cr.push_preset(TEACH, klass.code, {"lr": 0.01}, ["lr"], seen1.version)
    err = refused(cr.push_preset, TEACH2, klass.code, {"lr": 0.5}, [], seen2.version)
    assert (err.code, err.params) == ("class.stale", {"version": 2})
    assert refused(cr.set_limits, TEACH2, klass.code, ClassLimits(max_epochs=1),
                   seen2.version).code == "class.stale"
    assert refused(cr.push_preset, TEACH2, klass.code, {}, [], None).code == "class.stale"
    info = cr.get_class(TEACH2, klass.code)   # nothing overwritten; reloaded, it works
    assert info.preset == {"lr": 0.01} and info.locked == ("lr",) and info.limits == ClassLimits()
    assert cr.push_preset(TEACH2, klass.code, {"lr": 0.5}, [], info.version).version == 3
    assert cr.my_classes(TEACH2) == []


# -- joining ---------------------------------------------------------------------------------
def test_join_errors_and_two_tabs(cr, klass):
    code = klass.code
    m = cr.student_view(ANA).membership
    assert (m.code, m.nickname, m.title) == (code, "Ana", "Period 3")
    assert cr.join(ANA, code.lower().replace("-", " "), "Another name", "tab-2") == m  # joins once
    assert cr.get_class(TEACH, code).members == 3
    dora = Person("browser:dora-cookie-4", "Dora")
    for nick, err_code in [("", "class.nickname_length"), ("   ", "class.nickname_length"),
                           ("x" * 500, "class.nickname_length"),
                           ("<b>Dora</b>", "class.nickname_markup"),
                           ("**Dora**", "class.nickname_markup"),
                           ("=HYPERLINK(1)", "class.nickname_markup"),
                           ("[me](http://x)", "class.nickname_markup"),
                           ("aNa", "class.nickname_taken")]:
        err = refused(cr.join, dora, code, nick, "dora-key")
        assert (err.code, err.field) == (err_code, "nickname"), nick
    assert refused(cr.join, dora, code, "x" * 500, "k").params == {"n": 24, "got": 500}
    assert cr.student_view(dora) is None
    assert cr.join(dora, code, "  Dora   la  exploradora ", "dora-key").nickname == \
        "Dora la exploradora"
    cr.set_open(TEACH, code, False)
    eve = Person("browser:eve-cookie-5", "Eve")
    assert refused(cr.join, eve, code, "Eve", "eve-key").code == "class.closed"
    assert cr.join(ANA, code, "Ana", "tab-3").code == code   # a member's reload still works
    assert refused(cr.join, eve, "no-such-99", "Eve", "eve-key").code == "class.unknown_code"
    assert refused(cr.join, eve, "<script>", "Eve", "eve-key").code == "class.unknown_code"
    # leaving and joining another class
    assert cr.leave(dora) and not cr.leave(dora) and cr.student_view(dora) is None
    other = cr.create_class(TEACH, "Period 4")
    assert cr.join(ANA, other.code, "Ana", "k").code == other.code
    assert cr.student_view(ANA).membership.code == other.code
    assert cr.get_class(TEACH, code).members == 2


def test_join_attempts_are_rate_limited(cr, klass, clock):
    eve = Person("browser:eve-cookie-5", "Eve")
    for i in range(cr.limiter.client.free):
        assert refused(cr.join, eve, f"XXX-XX{names.CODE_ALPHABET[i]}", "Eve", "eve-ip").code == \
            "class.unknown_code"
    err = refused(cr.join, eve, klass.code, "Eve", "eve-ip")   # even the right code now
    assert err.code == "class.rate_limited" and err.params["seconds"] == 2
    assert cr.student_view(eve) is None
    assert cr.join(Person("browser:fay-cookie-6", "Fay"), klass.code, "Fay", "fay-ip")
    clock.t += 2
    assert cr.join(eve, klass.code, "Eve", "eve-ip").code == klass.code
    # many browsers guessing: each that goes on guessing waits, one that is not gets in at once
    for i in range(cr.limiter.overall.free):
        for _ in range(cr.limiter.guessing_after):
            refused(cr.join, Person(f"browser:bot-{i}", "bot"), "RRR-RRR", "bot", f"ip-{i}")
    bot = Person("browser:bot-0", "bot")
    assert refused(cr.join, bot, "RRR-RRX", "bot", "ip-0").code == "class.rate_limited"
    assert cr.join(Person("browser:gil-cookie-7", "Gil"), klass.code, "Gil", "gil-ip")
    clock.t += cr.limiter.counters.forget_s   # old failures are forgotten
    assert refused(cr.join, bot, "RRR-RRX", "bot", "ip-0").code == "class.unknown_code"


def test_class_codes_are_no_words_and_have_no_look_alikes():
    alphabet = set(names.CODE_ALPHABET)
    # no vowel (y included), so no syllable of English, Spanish or Portuguese: no word forms
    assert not alphabet & set("AEIOUY") and alphabet <= set("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    # none of a pair that is taken one for the other (0/O/Q, 1/I/L, 2/Z, 5/S, 8/B, 6/G, U/V)
    # is both in; here the letters of each pair are left out
    assert not alphabet & set("0OQ1IL2Z5S8BGUV")
    codes = {names.new_code() for _ in range(300)}
    assert all(names.CODE_RE.fullmatch(c) for c in codes) and len(codes) > 290
    assert {ch for c in codes for ch in c} == alphabet | {"-"}   # every symbol is drawn
    assert not any(re.search(r"[a-z]", c) for c in codes)
    assert len(alphabet) ** 6 > 30_000_000           # more than the word codes' 4 million
    # typed as read aloud: any case, spaces or no dash
    code = "K7M-4PX"
    for typed in ("k7m-4px", " K7M 4PX ", "k7m4px", "K7M_4PX", "k 7 m 4 p x"):
        assert names.normalize_code(typed) == code, typed
    for wrong in ("K7M-4PO", "K7M-4P", "K7M-4PXX", "A7M-4PX", "", None, "x" * 50):
        assert names.normalize_code(wrong) is None, wrong
    assert names.normalize_code("Blue Fox 42 ") is None   # the old word codes are no codes


# -- the board, cancel, presenter ------------------------------------------------------------
def test_board_cancel_pin_and_presenter(cr, klass, queue):
    a = queue.submit(SID[ANA], QUICK, owner=ANA.id)
    b = queue.submit(SID[BEN], QUICK, owner=BEN.id)
    done = finished(queue.store, klass.code, CAL, 0.4, 0.42)
    queue.store.record(done, steps=list(range(1, 1001)),
                       losses=[2.3 - i / 1000 for i in range(1000)])
    outsider = queue.submit("walk-in-session-1", QUICK, owner="browser:walk-in")
    rows = {r.run_id: r for r in cr.board(TEACH, klass.code)}
    assert set(rows) == {a, b, done}
    assert (rows[a].nickname, rows[a].status, rows[a].queue_position) == ("Ana", "queued", 1)
    assert rows[b].queue_position == 2 and rows[done].queue_position is None
    assert rows[done].accuracy == pytest.approx(0.41) and rows[done].status == "done"
    assert 30 <= len(rows[done].losses) <= 40 and rows[done].steps[-1] == 1000
    assert rows[done].steps[0] == 1 and all(  # the run's own losses at those steps
        loss == pytest.approx(2.3 - (step - 1) / 1000) for step, loss in zip(rows[done].steps,
                                                                          rows[done].losses))
    # cancel: only this class's runs
    assert cr.cancel_run(TEACH, klass.code, a) == "cancelled"
    run = queue.store.get(a)
    assert run.status == "cancelled" and "instructor" in run.error_text("en")
    assert refused(cr.cancel_run, TEACH, klass.code, outsider).code == "class.not_class_run"
    assert refused(cr.cancel_run, TEACH, klass.code, "../../etc").field == "run_id"
    assert queue.store.get(outsider).status == "queued"
    # pin one run: the presenter view (students: no run id)
    assert refused(cr.pin, TEACH, klass.code, outsider).code == "class.not_class_run"
    cr.pin(TEACH, klass.code, done)
    shown = cr.presenter(BEN)
    assert (shown.nickname, shown.status) == ("Cal", "done") and done not in repr(shown)
    assert shown.accuracy == pytest.approx(0.41)
    assert (len(shown.steps), shown.steps[-1], shown.events) == (1000, 1000, ())
    # the tutorial's running loss (its lines) for the Train page's chart, drawn on the projector
    queue.store.record(done, events=[("start", {"steps_per_epoch": 500, "total_steps": 1000})]
                       + [("running_loss", {"epoch": epoch, "i": i, "loss": loss})
                          for epoch, i, loss in [(1, 250, 2.2), (1, 500, 2.0), (2, 250, 1.9)]])
    shown = cr.presenter(TEACH, klass.code)
    view = RunView()
    view.add_events(shown.events)
    view.series.add(shown.steps, shown.losses)
    assert view.chart()["running_steps"] == [250, 500, 750]
    # a projector reads on from what it drew: nothing new, the same run
    later = cr.presenter(TEACH, klass.code, view.last_step, view.last_seq)
    assert (later.steps, later.events, later.created_at) == ((), (), shown.created_at)
    queue.store.record(done, steps=[1001], losses=[1.5])
    assert cr.presenter(TEACH, klass.code, view.last_step, view.last_seq).steps == (1001,)
    assert cr.get_class(TEACH, klass.code).pinned == done


# -- challenges ------------------------------------------------------------------------------
def test_leaderboards_public_private_ties_one_best_per_student(cr, klass, queue):
    s = queue.store
    finished(s, klass.code, ANA, 0.99, 0.99, finished_at=1.0)  # before the challenge
    info = cr.open_challenge(TEACH, klass.code, {"kind": "best_accuracy", "max_epochs": 2,
                                                 "device": "cpu"})
    assert info.challenge.is_open and info.challenge.goal == Goal("best_accuracy", 2, "cpu")
    assert refused(cr.open_challenge, TEACH, klass.code, Goal("best_accuracy")).code == \
        "class.challenge_open"
    # while it is open, submits keep its rules
    assert refused(queue.submit, SID[ANA], QUICK.replace(epochs=3), owner=ANA.id).code == \
        "class.challenge_epochs"
    t = 2_000_000_000.0
    finished(s, klass.code, ANA, 0.50, 0.60, finished_at=t + 1)
    a2 = finished(s, klass.code, ANA, 0.55, 0.52, finished_at=t + 2)   # Ana's best in public
    finished(s, klass.code, BEN, 0.55, 0.70, finished_at=t + 3)   # ties Ana, later
    finished(s, klass.code, CAL, 0.40, 0.65, finished_at=t + 4)
    finished(s, klass.code, CAL, 0.90, 0.90, epochs=3, finished_at=t + 5)      # breaks the rule
    finished(s, klass.code, CAL, 0.90, 0.90, device="cuda:0", finished_at=t + 6)
    finished(s, klass.code, BEN, 0.95, 0.95, status="cancelled", finished_at=t + 7)
    pub = cr.leaderboard(TEACH, klass.code, "public")
    # a tie shares its place (1, 1, 3); the earlier finish is listed first
    assert [(r.rank, r.nickname, r.run_number, r.score) for r in pub] == [
        (1, "Ana", 3, 0.55), (1, "Ben", 1, 0.55), (3, "Cal", 1, 0.40)]   # Ana's 1st: too early
    priv = cr.leaderboard(TEACH, klass.code, "private")
    assert [(r.nickname, r.run_number, r.score) for r in priv] == [
        ("Ben", 1, 0.70), ("Cal", 1, 0.65), ("Ana", 2, 0.60)]
    # a student: nicknames and scores, their own row marked, nobody else's ids
    seen = cr.leaderboard(BEN, klass.code, "public")
    assert [(r.nickname, r.you) for r in seen] == [("Ana", False), ("Ben", True), ("Cal", False)]
    assert SID[ANA] not in repr(seen) and a2 not in repr(seen) and ANA.id not in repr(seen)
    assert refused(cr.leaderboard, BEN, klass.code, "private").code == "class.private_hidden"
    assert cr.leaderboard(BEN, klass.code, "secret") == []      # no such board: nothing in it
    view = cr.student_view(CAL)
    assert (view.rank, view.ranked, view.challenge.goal.max_epochs) == (3, 3, 2)
    # closing reveals the private board; later runs no longer count
    cr.close_challenge(TEACH, klass.code)
    finished(s, klass.code, CAL, 1.0, 1.0, finished_at=t + 8)
    assert [r.nickname for r in cr.leaderboard(ANA, klass.code, "private")] == ["Ben", "Cal", "Ana"]
    assert refused(cr.close_challenge, TEACH, klass.code).code == "class.no_challenge"
    queue.submit(SID[ANA], QUICK.replace(epochs=3), owner=ANA.id)   # the rules are lifted
    # the CSV export
    text = leader_csv(cr.leaderboard(TEACH, klass.code, "private"), "private", "best_accuracy")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["rank"], r["nickname"], r["run"], float(r["score"])) for r in rows] == [
        ("1", "Ben", "1", 0.70), ("2", "Cal", "1", 0.65), ("3", "Ana", "2", 0.60)]
    assert rows[0]["board"] == "private" and rows[0]["goal"] == "best_accuracy"
    assert float(rows[0]["train_seconds"]) == 10.0 and "person" not in rows[0]


def test_fastest_to_a_target(cr, klass, queue):
    s = queue.store
    for goal, code in [({"kind": "fastest_to"}, "class.goal_target"),
                       ({"kind": "fastest_to", "target": 50}, "class.goal_target"),
                       ({"kind": "slowest"}, "class.goal_kind"),
                       ({"kind": "best_accuracy", "max_epochs": 0}, "class.goal_epochs")]:
        assert refused(cr.open_challenge, TEACH, klass.code, goal).code == code
    cr.open_challenge(TEACH, klass.code, Goal("fastest_to", target=0.5))
    t = 2_000_000_000.0
    finished(s, klass.code, ANA, 0.49, 0.60, seconds=5.0, finished_at=t + 1)   # misses public
    finished(s, klass.code, ANA, 0.51, 0.51, seconds=30.0, finished_at=t + 2)
    finished(s, klass.code, BEN, 0.70, 0.45, seconds=20.0, finished_at=t + 3)
    finished(s, klass.code, CAL, 0.60, 0.60, seconds=20.0, finished_at=t + 4)
    queue.submit(SID[ANA], QUICK.replace(epochs=5), owner=ANA.id)   # no epoch rule here
    pub = cr.leaderboard(TEACH, klass.code, "public")
    assert [(r.nickname, r.run_number, r.score) for r in pub] == [
        ("Ben", 1, 20.0), ("Cal", 1, 20.0), ("Ana", 2, 30.0)]
    priv = cr.leaderboard(TEACH, klass.code, "private")
    assert [(r.nickname, r.score) for r in priv] == [("Ana", 5.0), ("Cal", 20.0)]
    assert "fastest_to" in leader_csv(pub, "public", "fastest_to")


# -- the store: restart, migration -----------------------------------------------------------
def test_everything_survives_a_restart(tmp_path):
    path = tmp_path / "runs.db"
    store = RunStore(path)
    cr = Classroom(store)
    info = cr.create_class(TEACH, "Period 3")
    info = cr.push_preset(TEACH, info.code, {"lr": 0.01}, ["lr"], info.version)
    info = cr.set_limits(TEACH, info.code, ClassLimits(max_epochs=2, devices=("cpu",)),
                         info.version)
    cr.join(ANA, info.code, "Ana", "k")
    run_id = finished(store, info.code, ANA, 0.5, 0.6)
    cr.pin(TEACH, info.code, run_id)
    cr.open_challenge(TEACH, info.code, Goal("best_accuracy", max_epochs=2))
    cr.set_open(TEACH, info.code, False)
    before = cr.get_class(TEACH, info.code)
    store.close()
    del cr, store
    store = RunStore(path)                       # the server restarted
    again = Classroom(store)
    assert again.get_class(TEACH, info.code) == before
    assert again.student_view(ANA).membership.nickname == "Ana"
    assert again.student_view(ANA).locked == ("lr",)
    assert again.presenter(ANA).nickname == "Ana"
    assert [r.run_id for r in again.board(TEACH, info.code)] == [run_id]


def test_an_older_store_migrates_to_the_classroom(tmp_path):
    old = old_store(tmp_path / "runs.db", version=2)
    run_id = old.create_run("old-session-1", "train", QUICK.to_dict(), "cpu")
    assert schema_version(old) == 2
    store = RunStore(tmp_path / "runs.db")
    assert schema_version(store) == SCHEMA_VERSION and store.get(run_id).owner == "old-session-1"
    info = Classroom(store).create_class(TEACH, "After the upgrade")
    assert Classroom(RunStore(tmp_path / "runs.db")).my_classes(TEACH)[0].code == info.code


def test_get_classroom_is_one_per_queue_store(queue):
    assert get_classroom(queue) is get_classroom(queue)
    assert get_classroom(queue).store is queue.store


# -- the two halves of the test set ----------------------------------------------------------
def test_the_halves_are_fixed_disjoint_and_scored_like_a_direct_count():
    pub, priv = split_halves(10000)
    assert len(pub) == len(priv) == 5000 and not set(pub) & set(priv)
    assert sorted({*pub, *priv}) == list(range(10000))
    perm = np.random.RandomState(HALVES_SEED).permutation(10000)   # how it is fixed
    assert (pub == np.sort(perm[:5000])).all()
    assert pub[:5].tolist() == split_halves.__wrapped__(10000)[0][:5].tolist()
    odd = split_halves(7)
    assert (len(odd[0]), len(odd[1])) == (3, 4)
    # a real (untrained) network on 301 random images: the recorded halves are plain counts
    torch.manual_seed(0)
    gen = np.random.default_rng(1)

    class Data:
        test_x = torch.from_numpy(gen.integers(0, 256, (301, 3, 32, 32), dtype=np.uint8))
        test_y = gen.integers(0, 10, 301)
        classes = tuple("abcdefghij")

    model = Net()
    res = evaluate(model, Data, batch_size=64)
    from cifarlab.core.data.pipelines import normalize

    with torch.no_grad():
        preds = model.eval()(normalize(Data.test_x)).argmax(1).numpy()
    ok = preds == Data.test_y
    halves = res.summary()["half_accuracies"]
    pub, priv = split_halves(301)
    assert halves == {"public": float(ok[pub].mean()), "private": float(ok[priv].mean())}
    assert res.accuracy == pytest.approx(float(ok.mean()))
    probs = np.eye(10, dtype=np.float32)[Data.test_y]            # all right: both halves 1.0
    assert result_from_probabilities(probs, Data.test_y, Data.classes).half_accuracies() == \
        {"public": 1.0, "private": 1.0}


# -- catalogs --------------------------------------------------------------------------------
def test_every_class_error_code_is_in_every_catalog_with_the_same_placeholders():
    """tests/test_errors.py reads the raise sites of the base errors; ClassError's are here."""
    codes = set()
    for path in (ROOT / "cifarlab/serve/classroom").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ClassError":
                arg = node.args[0]
                assert isinstance(arg, ast.Constant) and " " not in arg.value, path
                codes.add(arg.value)
    codes |= {"class.cancelled_by_instructor", "class.locked_reason"}
    assert len(codes) > 25
    for code in codes:
        en = i18n.catalog("en")[f"errors.{code}"]
        for lang in ("es", "pt"):
            text = i18n.catalog(lang)[f"errors.{code}"]
            assert set(re.findall(r"\{(\w+)", text)) == set(re.findall(r"\{(\w+)", en)), code
    keys = {lang: {k for k in i18n.catalog(lang) if k.startswith("errors.class.")}
            for lang in i18n.LANGUAGES}
    assert keys["en"] == keys["es"] == keys["pt"] == {f"errors.{c}" for c in codes}


# -- one real run, scored on what its evaluation recorded -----------------------------------
@pytest.mark.integration
def test_a_real_class_run_is_scored_on_its_recorded_halves(queue, cifar_data):
    """A class run trained for real (in this process, as a worker would, on 256 CIFAR-10
    images and 600 test images): its ``eval`` event's halves feed the leaderboard, and they
    equal a direct count of its network's right answers on each half."""
    from dataclasses import replace

    from cifarlab.core.evaluate import predict
    from cifarlab.core.train import train

    small = replace(cifar_data, test_x=cifar_data.test_x[:600], test_y=cifar_data.test_y[:600],
                    cache_path="")
    cr = Classroom(queue.store)
    info = cr.create_class(TEACH, "Real run")
    cr.push_preset(TEACH, info.code, {"train_subset": 256}, ["train_subset"], info.version)
    cr.open_challenge(TEACH, info.code, Goal("best_accuracy", max_epochs=1))
    cr.join(ANA, info.code, "Ana", "k")
    run_id = queue.submit(SID[ANA], QUICK, owner=ANA.id)    # recorded for the class
    store = queue.store
    store.set_status(run_id, "running")
    result = train(QUICK, small, on_event=lambda e: store.record(run_id, events=[(e.kind,
                                                                                   e.data)]))
    store.set_status(run_id, "done", result=result.summary())
    (pub,) = cr.leaderboard(TEACH, info.code, "public")
    (priv,) = cr.leaderboard(TEACH, info.code, "private")
    ok = predict(result.model, small.test_x).argmax(1) == np.asarray(small.test_y)
    pub_idx, priv_idx = split_halves(600)
    assert (pub.run_number, pub.nickname) == (1, "Ana")
    assert pub.score == float(ok[pub_idx].mean()) and priv.score == float(ok[priv_idx].mean())
    assert result.summary()["test_accuracy"] == pytest.approx(float(ok.mean()))


def test_each_student_trains_with_their_own_seed_unless_the_class_locks_it(cr, klass, queue):
    """One seed for everyone made every student's run the same run (a challenge then went to
    whoever finished first): each member gets a seed of their own, the same on every visit."""
    info = cr.push_preset(TEACH, klass.code, {"epochs": 1, "seed": 0}, locked=["epochs"],
                          expected_version=klass.version)
    views = {p: cr.student_view(p) for p in (ANA, BEN, CAL)}
    seeds = {p: v.seed for p, v in views.items()}
    assert len(set(seeds.values())) == 3 and all(0 <= s <= MAX_SEED for s in seeds.values())
    assert cr.student_view(ANA).seed == seeds[ANA]                 # stable
    assert views[ANA].values == {"epochs": 1, "seed": seeds[ANA]}  # over the pushed 0
    assert views[ANA].preset == {"epochs": 1, "seed": 0}           # the class's own, as pushed
    assert str(seeds[ANA]) not in ANA.id and ANA.id not in repr(views[BEN])
    # locked: the class's seed for everyone (the console warns the instructor about it)
    cr.push_preset(TEACH, klass.code, {"epochs": 1, "seed": 7}, locked=["epochs", "seed"],
                   expected_version=info.version)
    view = cr.student_view(BEN)
    assert view.seed is None and view.values == {"epochs": 1, "seed": 7}
    assert refused(queue.submit, SID[BEN], QUICK.replace(epochs=1, seed=8),
                   owner=BEN.id).code == "class.knob_locked"
