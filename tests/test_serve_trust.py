"""Trust on the serving side: no credential leaves, nobody can lock a class out, nicknames that
look alike are refused, and a locked knob is named in the student's language.

- No record, CSV, zip or message a person can see or download holds another person's id: a
  ``browser:<session id>`` lets a browser rename, cancel, delete and download that person's
  runs, and a ``user:<e-mail>`` is an address. Boards name nicknames and run numbers.
- Guessing class codes or the instructor's passphrase is slowed per browser, per target and
  overall, and a right code or passphrase from a browser that has not been guessing is never
  delayed: attacker threads hammer while a student and the instructor get in at once. How many
  tries attackers get is counted on a clock the test drives (never a wall-clock bound).
- The session cookie is as strict as a page can make it (docs/security.md says why).
"""
from __future__ import annotations

import csv
import io
import threading
import zipfile
from collections import Counter
from types import SimpleNamespace

import pytest
from sqlalchemy import text
import torch

from cifarlab import i18n
from cifarlab.core.checkpoint import Checkpoint
from cifarlab.core.config import CIFAR10_CLASSES, TrainConfig
from cifarlab.core.model import Net
from cifarlab.errors import JobError
from cifarlab.lab.classroom import experiment_csv, leader_csv
from cifarlab.serve import identity
from cifarlab.serve.classroom import names, tables
from cifarlab.serve.classroom.facade import Classroom
from cifarlab.serve.classroom.model import ClassError, ClassLimits, Goal
from cifarlab.serve.identity import Person
from cifarlab.serve.queue import JobQueue
from cifarlab.serve.settings import load_settings

QUICK = TrainConfig(epochs=1, train_subset=256, batch_size=32, pipeline="fast", num_workers=0,
                    device="cpu")
TEACH = Person("user:teacher@school.edu", "teacher@school.edu", instructor=True)
ANA_SID, BEN_EMAIL = "AnaSecretSid_0123456789", "ben.private@school.edu"
ANA = Person(identity.BROWSER + ANA_SID, "Ana")
BEN = Person(identity.USER + BEN_EMAIL, "Ben")
CAL = Person("browser:CalSecretSid_9876543210", "Cal")
SECRETS = (ANA_SID, BEN_EMAIL, "CalSecretSid_9876543210")
PHRASE = "correct horse battery staple"
FAST = dict(n=2 ** 10, r=8, p=1)   # the cheapest scrypt cost verify accepts


class Clock:
    """Seconds that pass only when the test says so (threads read it too)."""

    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


@pytest.fixture
def queue(tmp_path):
    settings = load_settings(env={}, home=str(tmp_path / "home"),
                             data=str(tmp_path / "no-data-here"), max_per_owner=10)
    q = JobQueue(settings=settings, start=False)
    yield q
    q.shutdown()


def finished(store, code, person, public, private, *, finished_at, session="s-ession-1"):
    run_id = store.create_run(session, "train", QUICK.to_dict(), "cpu", owner=person.id)
    tables.record_run(store, code, person.id, run_id)
    store.set_status(run_id, "running")
    store.record(run_id, events=[("eval", {
        "accuracy": (public + private) / 2,
        "half_accuracies": {"public": public, "private": private}})])
    store.set_status(run_id, "done", result={"test_accuracy": (public + private) / 2,
                                             "train_seconds": 12.5})
    with store._write() as c:
        c.execute(text("UPDATE runs SET finished_at = :t WHERE id = :id"),
                  {"t": finished_at, "id": run_id})
    return run_id


def no_secret_in(text: str) -> bool:
    return not any(s in text for s in SECRETS)


# -- credentials never leave -----------------------------------------------------------------
def test_no_board_csv_or_record_names_a_person_by_their_id(queue):
    cr = Classroom(queue.store)
    info = cr.create_class(TEACH, "Period 3")
    for p in (ANA, BEN, CAL):
        cr.join(p, info.code, p.name, client_key=p.id)
    cr.open_challenge(TEACH, info.code, Goal("best_accuracy"))
    cr.set_experiment(TEACH, info.code, "batch_size", "16 32", info.version)
    t = 2_000_000_000.0
    a1 = finished(queue.store, info.code, ANA, 0.50, 0.60, finished_at=t + 1)
    a2 = finished(queue.store, info.code, ANA, 0.70, 0.40, finished_at=t + 2)
    finished(queue.store, info.code, BEN, 0.60, 0.70, finished_at=t + 3)
    finished(queue.store, info.code, CAL, 0.10, 0.10, finished_at=t + 4)
    cr.pin(TEACH, info.code, a2)
    cr.close_challenge(TEACH, info.code)
    seen, cals = [], []
    for which in ("public", "private"):
        text = leader_csv(cr.leaderboard(TEACH, info.code, which), which, "best_accuracy")
        assert no_secret_in(text), text
        rows = list(csv.DictReader(io.StringIO(text)))
        assert {(r["nickname"], r["run"]) for r in rows} >= {("Ben", "1"), ("Cal", "1")}
        assert ("Ana", "2" if which == "public" else "1") in {(r["nickname"], r["run"])
                                                              for r in rows}
        seen.append(cr.leaderboard(TEACH, info.code, which))
        cals.append(cr.leaderboard(CAL, info.code, which))
    board = cr.board(TEACH, info.code)
    assert sorted((r.nickname, r.run_number) for r in board) == [
        ("Ana", 1), ("Ana", 2), ("Ben", 1), ("Cal", 1)]
    experiment = cr.experiment(TEACH, info.code)
    assert len(experiment.rows) == 4
    seen += [board, cr.presenter(TEACH, info.code), experiment, experiment_csv(experiment)]
    assert no_secret_in(repr(seen)), repr(seen)       # the instructor's: nobody's id
    cals += [cr.presenter(CAL, info.code), cr.student_view(CAL), cr.experiment(CAL)]
    assert {r.run_id for r in cals[-1].rows} - {""} == {
        r.run_id for r in board if r.nickname == "Cal"}   # a run id: only on Cal's own
    assert ANA_SID not in repr(cals) and BEN_EMAIL not in repr(cals)   # Cal's: only Cal's
    # a student's own row is theirs to see (their own id and run), nobody else's
    mine = [r for r in cr.leaderboard(ANA, info.code, "public") if r.you]
    assert mine[0].run_number == 2 and a1 != a2
    # what a student can provoke about others says nickname, never id
    dora = Person("browser:DoraSid_55555555", "Dora")
    errors = [pytest.raises(ClassError, cr.join, dora, info.code, "ben", "d").value,
              pytest.raises(ClassError, cr.join, dora, info.code, "Веn", "d").value,
              pytest.raises(ClassError, cr.cancel_run, CAL, info.code, a1).value,
              pytest.raises(ClassError, cr.leaderboard, dora, info.code).value]
    for err in errors:
        for lang in i18n.LANGUAGES:
            assert no_secret_in(err.text(lang) + repr(err.params)), err.text(lang)


def test_take_your_run_home_holds_no_session_or_owner(tmp_path):
    from cifarlab.lab.runs import bundle_for_run

    torch.manual_seed(0)
    ckpt = Checkpoint(Net().state_dict(), QUICK, tuple(CIFAR10_CLASSES),
                      {"test_accuracy": 0.42, "train_seconds": 3.0})
    run = SimpleNamespace(id="5e1f0c2a9b8d4e7f8a6b5c4d3e2f1a0b", name="my run", session=ANA_SID,
                          owner=ANA.id, result={"test_accuracy": 0.42, "train_seconds": 3.0},
                          env={"torch": torch.__version__}, started_at=2e9, created_at=2e9)
    blob = bundle_for_run(run, ckpt, [1, 2], [2.3, 2.2], "es")
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        for name in z.namelist():
            data = z.read(name)
            assert not any(s.encode() in data for s in SECRETS), name


# -- nobody can lock a class out -------------------------------------------------------------
def wrong_code(n: int) -> str:
    """The n-th of many well-formed class codes (a class's own is drawn at random)."""
    a = names.CODE_ALPHABET
    return f"{a[n // 324 % 18]}{a[n // 18 % 18]}{a[n % 18]}-XXX"


def test_seven_browsers_guessing_do_not_keep_a_student_out(queue):
    """The finding: 7 browsers × 5 wrong codes kept a student typing the right one out."""
    cr = Classroom(queue.store, clock=Clock())
    info = cr.create_class(TEACH, "Period 3")
    for i in range(7):
        for n in range(5):
            with pytest.raises(ClassError):
                cr.join(Person(f"browser:bot-{i}", "bot"), wrong_code(n), "bot", f"bot{i}")
    assert cr.join(ANA, info.code, "Ana", ANA_SID).code == info.code
    typo = Person("browser:typo-1", "Typo")     # one typo first is not guessing either
    with pytest.raises(ClassError):
        cr.join(typo, info.code.replace("-", "+", 1) + "0", "Typo", "typo-key")
    assert cr.join(typo, info.code, "Typo", "typo-key").code == info.code


def test_guessing_stays_slow_however_many_browsers_hammer(queue):
    clock = Clock()
    cr = Classroom(queue.store, clock=clock)
    cr.create_class(TEACH, "Period 3")
    verdicts, limited = Counter(), Counter()
    lock = threading.Lock()

    def bot(i):
        for n in range(60):
            try:
                cr.join(Person(f"browser:bot-{i}", "bot"), wrong_code(n), "bot", f"b{i}")
            except ClassError as err:
                with lock:
                    (limited if err.code == "class.rate_limited" else verdicts)[i] += 1

    threads = [threading.Thread(target=bot, args=(i,)) for i in range(20)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    # the limits docs/security.md states: 3 free a browser, 5 a code, 30 in all, then waits
    # from 2 s (1 s for all) doubling to 5 min; guessing from the 2nd failure; forgotten in 1 h
    lim = cr.limiter
    assert [(b.free, b.base_s, b.cap_s) for b in (lim.client, lim.target, lim.overall)] == [
        (3, 2.0, 300.0), (5, 2.0, 300.0), (30, 1.0, 300.0)]
    assert (lim.guessing_after, lim.counters.forget_s) == (2, 3600)
    # while no time passes, a browser learns about 3 codes at most, then only waits
    assert max(verdicts.values()) <= cr.limiter.client.free
    assert sum(verdicts.values()) <= 20 * cr.limiter.guessing_after + cr.limiter.overall.free
    assert sum(limited.values()) == 20 * 60 - sum(verdicts.values())
    # ten browsers trying for an hour, each as soon as it may
    tries, end = 0, clock.t + 3600
    while clock.t < end:
        waits = [cr.limiter.wait(f"b{i}", wrong_code(999)) for i in range(10)]
        if min(waits) > 0:
            clock.t += min(waits)
            continue
        i = waits.index(0.0)
        with pytest.raises(ClassError):
            cr.join(Person(f"browser:bot-{i}", "bot"), wrong_code(999), "bot", f"b{i}")
        tries += 1
    # after the first few, one wrong code every 5 minutes for all ten together
    assert tries <= 10 * cr.limiter.guessing_after + 3600 / cr.limiter.overall.cap_s + 5, tries


@pytest.mark.parametrize("moving", [False, True])
def test_attackers_hammer_while_the_student_and_instructor_get_in_at_once(queue, moving):
    """Threads hammer wrong codes and wrong passphrases, past the old overall limits (30 and
    20 failures); a student with the right code and the instructor with the right passphrase
    get in on their first try. ``moving``: the attackers' backoffs run out as the test's clock
    advances, so they go on failing all along."""
    clock = Clock()
    cr = Classroom(queue.store, clock=clock)
    info = cr.create_class(TEACH, "Period 3")
    stored = identity.hash_passphrase(PHRASE, **FAST)
    gate = identity.AttemptLimiter(clock=clock, name="passphrase (test)",
                                   counters=queue.counters("passphrase"))
    stop = threading.Event()
    outcome = Counter()
    lock = threading.Lock()

    def count(what):
        with lock:
            outcome[what] += 1

    # Each bot tries again after 1 ms, as over a network, where a try takes a round trip: bots
    # with no pause at all starve the student's thread of the GIL and of the store for
    # seconds, which measures the interpreter, not the limits.
    def code_bot(i):
        n = 0
        while not stop.wait(0.001):
            try:
                cr.join(Person(f"browser:bot-{i}-{n // 5}", "bot"), wrong_code(n % 900),
                        "bot", f"bot-{i}-{n // 5}")   # a fresh browser every 5 tries
            except ClassError as err:
                count(err.code)
            n += 1

    def phrase_bot(i):
        n = 0
        while not stop.wait(0.001):
            wait = identity.try_passphrase(f"wrong guess {n}", stored, f"pbot-{i}-{n // 5}", gate)
            count("phrase waits" if wait else "phrase wrong")
            n += 1

    bots = [threading.Thread(target=code_bot, args=(i,)) for i in range(7)]
    bots += [threading.Thread(target=phrase_bot, args=(i,)) for i in range(4)]
    for th in bots:
        th.start()
    try:
        def past_the_old_limits():
            if moving:
                clock.t += 1.0
            return outcome["class.unknown_code"] >= 35 and outcome["phrase wrong"] >= 20

        while not past_the_old_limits():
            stop.wait(0.01)
        got = {}

        def student():
            got["student"] = cr.join(ANA, info.code, "Ana", ANA_SID)

        def instructor():
            got["instructor"] = identity.try_passphrase(PHRASE, stored, "teacher-laptop", gate)

        pair = [threading.Thread(target=student), threading.Thread(target=instructor)]
        for th in pair:
            th.start()
        for th in pair:
            th.join()
    finally:
        stop.set()
        for th in bots:
            th.join()
    assert got["student"].code == info.code and got["instructor"] is None
    assert outcome["class.rate_limited"] > 0 and outcome["phrase waits"] > 0   # they were slowed


def test_the_passphrase_limit_holds_a_guesser_before_scrypt_and_not_the_instructor(queue):
    clock = Clock()
    stored = identity.hash_passphrase(PHRASE, **FAST)
    gate = identity.AttemptLimiter(clock=clock, counters=queue.counters("passphrase"))
    answers = [identity.try_passphrase("nope nope nope", stored, "bot", gate) for _ in range(6)]
    assert answers[:2] == [0, 0] and all(a > 0 for a in answers[3:])
    assert identity.try_passphrase(PHRASE, stored, "bot", gate) > 0    # waits, unchecked
    assert identity.try_passphrase(PHRASE, stored, "laptop", gate) is None
    clock.t += answers[-1]
    assert identity.try_passphrase(PHRASE, stored, "bot", gate) is None   # forgiven
    assert gate.wait("bot", identity.PASSPHRASE_TARGET) == 0


# -- nicknames that look alike, invisible characters -----------------------------------------
@pytest.mark.parametrize("taken, twin", [("Ana", "\u0410na"), ("Ana", "ANA"), ("paco", "\u03c1aco"),
                                         ("Paco", "\uff30\uff41\uff43\uff4f"), ("ll", "Il"),
                                         ("marta", "rnarta")])
def test_a_nickname_that_looks_like_a_classmates_is_refused(queue, taken, twin):
    cr = Classroom(queue.store)
    info = cr.create_class(TEACH, "Period 3")
    cr.join(BEN, info.code, taken, "ben")
    err = pytest.raises(ClassError, cr.join, ANA, info.code, twin, "ana").value
    assert err.field == "nickname"
    if twin.casefold() == taken.casefold():
        assert err.code == "class.nickname_taken"
    else:
        assert err.code == "class.nickname_confusable"
        assert taken in err.text("pt") and twin in err.text("pt")
    cr.leave(BEN)                                   # a member who left keeps the nickname
    assert pytest.raises(ClassError, cr.join, CAL, info.code, twin, "cal").value.field == \
        "nickname"


@pytest.mark.parametrize("other", ["Ali", "Anna", "Jos\u00e9", "\u0410\u043d\u044f"])
def test_nicknames_that_only_resemble_each_other_are_both_welcome(queue, other):
    cr = Classroom(queue.store)
    info = cr.create_class(TEACH, "Period 3")
    cr.join(BEN, info.code, {"Ali": "All", "Jos\u00e9": "Jose"}.get(other, "Ana"), "ben")
    assert cr.join(ANA, info.code, other, "ana").nickname == other


@pytest.mark.parametrize("char", ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066",
                                  "\u2067", "\u2068", "\u2069", "\u200e", "\u200f", "\u061c",
                                  "\u200b", "\u200d", "\u00ad", "\u2060", "\ufeff", "\u115f",
                                  "\u3164"])
def test_invisible_and_text_direction_characters_are_refused_by_name(char):
    err = pytest.raises(ClassError, names.clean_nickname, f"An{char}a").value
    assert err.code == "class.nickname_invisible" and err.field == "nickname"
    assert f"U+{ord(char):04X}" in err.text("es")


# -- the locked knob, by its label -----------------------------------------------------------
@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_a_locked_knob_is_named_by_its_label_in_the_students_language(queue, lang):
    cr = Classroom(queue.store)
    info = cr.create_class(TEACH, "Period 3")
    info = cr.push_preset(TEACH, info.code, {"epochs": 1, "shuffle": False},
                          locked=["epochs", "shuffle"], expected_version=info.version)
    cr.set_limits(TEACH, info.code, ClassLimits(), info.version)
    cr.join(ANA, info.code, "Ana", "ana")
    err = pytest.raises(JobError, queue.submit, "ana-session-1", QUICK.replace(epochs=2,
                                                                                shuffle=False),
                        owner=ANA.id).value
    assert (err.code, err.field) == ("class.knob_locked", "epochs")
    label = i18n.t("common.epochs", lang)
    assert label in err.text(lang) and "epochs" not in err.text(lang).replace(label, "")
    err = pytest.raises(JobError, queue.submit, "ana-session-1", QUICK.replace(epochs=1),
                        owner=ANA.id).value
    assert err.field == "shuffle" and i18n.t("common.shuffle", lang) in err.text(lang)
    assert i18n.t("common.no", lang) in err.text(lang) and "False" not in err.text(lang)


# -- the session cookie ----------------------------------------------------------------------
def test_the_session_cookie_is_strict_secure_over_https_and_lasts_a_month():
    from ui import session

    js = session.session_cookie_js("Abc_def-123456")
    assert "cifarlab_sid=Abc_def-123456; path=/; max-age=2592000; SameSite=Strict" in js
    assert "location.protocol === 'https:' ? '; Secure'" in js
    assert "Lax" not in js and "HttpOnly" not in js
    for bad in ["abc'; alert(1)//", "short", "x" * 65, "abcdefgh\n"]:
        with pytest.raises(ValueError):
            session.session_cookie_js(bad)
