"""What one person may queue (cifarlab.serve.admission through JobQueue.submit), who sees which
runs, and the scheduler's decisions: no worker process is started here (``start=False``).

Every refusal is a JobError with a code and the numbers a page needs, in every language."""
import ast
import re
from pathlib import Path
from string import Formatter

import pytest

from cifarlab import i18n
from cifarlab.core.config import TrainConfig
from cifarlab.errors import JobError
from cifarlab.serve import admission
from cifarlab.serve.queue import JobQueue
from cifarlab.serve.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
QUICK = TrainConfig(epochs=1, train_subset=256, batch_size=32, pipeline="fast", num_workers=0)
ALICE, BOB = "alice-session-1", "bob-session-22"


@pytest.fixture
def make_queue(tmp_path):
    """A JobQueue without its scheduler over a fresh home; 50,000 training images assumed."""
    queues = []

    def make(**overrides):
        settings = load_settings(env={}, home=str(tmp_path / "home"),
                                 data=str(tmp_path / "no-data-here"), **overrides)
        queues.append(JobQueue(settings=settings, start=False))
        return queues[-1]

    yield make
    for queue in queues:
        queue.shutdown()


def refused(call, *args, **kwargs) -> JobError:
    with pytest.raises(JobError) as info:
        call(*args, **kwargs)
    return info.value


def test_limits_are_enforced_with_clear_messages(make_queue):
    queue = make_queue(max_queue=3, max_per_owner=2, max_epochs=3, max_train_images=1000)
    err = refused(queue.submit, ALICE, QUICK.replace(epochs=4))
    # core's one validator, with this server's limits (the Train page calls the same one)
    assert "at most 3 epochs per run" in str(err)
    assert (err.code, err.field, err.params) == ("config.epochs_limit", "epochs", {"n": 3})
    err = refused(queue.submit, ALICE, QUICK.replace(train_subset=2000))
    assert "at most 1,000 images per run" in str(err)
    assert err.field == "train_subset" and "1.000" in err.text("es")
    assert refused(queue.submit, ALICE, QUICK.replace(train_subset=None)).code == \
        "config.subset_limit"
    err = refused(queue.submit, ALICE, QUICK.replace(device="cuda:7"))
    assert err.field == "device" and "cuda:7" in str(err)
    err = refused(queue.submit, ALICE, QUICK.replace(batch_size=512))   # more than 256 images
    assert err.field == "batch_size" and "512" in str(err)
    err = refused(queue.submit, ALICE, QUICK.to_dict())
    assert err.code == "serve.limits.not_a_config"
    assert refused(queue.submit, "bad id!", QUICK).field == "session"
    err = refused(queue.submit_job, ALICE, "mine_bitcoin", {}, "cpu")
    assert "Unknown job kind 'mine_bitcoin'" in str(err) and err.field == "kind"
    assert queue.store.counts()["queued"] == 0  # nothing refused was queued

    queue.submit(ALICE, QUICK)
    queue.submit(ALICE, QUICK)
    err = refused(queue.submit, ALICE, QUICK)
    assert str(err).startswith("You already have 2 runs queued or running (in this tab or "
                               "another), and this server allows 2 at a time per person")
    assert err.field == "session" and err.params == {"n": 2, "limit": 2}
    queue.submit(BOB, QUICK)
    err = refused(queue.submit, "carol-session", QUICK)
    assert str(err) == "The queue is full (3 runs waiting). Try again in a few minutes."
    assert err.field is None and err.text("pt") == ("A fila está cheia (3 execuções esperando). "
                                                    "Tente de novo em alguns minutos.")
    # auto resolved to a real device when queued
    assert all(r.device in ("cpu", "cuda:0", "mps") for r in queue.store.list_runs())


def test_dataloader_workers_are_bounded(make_queue):
    queue = make_queue(max_per_owner=5, max_num_workers=4)
    err = refused(queue.submit, ALICE, QUICK.replace(num_workers=5))
    assert (err.code, err.field, err.params) == ("config.num_workers_limit", "num_workers",
                                                 {"n": 4})
    queue.submit(ALICE, QUICK.replace(num_workers=4))            # this server's most
    err = refused(queue.submit_job, ALICE, "timing", {"num_workers": 64}, "cpu")
    assert err.code == "serve.limits.num_workers"                 # a timing's pipeline too
    strict = make_queue(max_num_workers=0)
    assert refused(strict.submit, BOB, QUICK.replace(num_workers=1)).params["n"] == 0


def test_a_person_is_counted_across_their_tabs(make_queue):
    queue = make_queue(max_per_owner=2)
    tab1, tab2, tab3 = "carol-tab-0001", "carol-tab-0002", "carol-tab-0003"
    a = queue.submit(tab1, QUICK, owner="cookie-carol")
    queue.submit(tab2, QUICK, owner="cookie-carol")
    err = refused(queue.submit, tab3, QUICK, owner="cookie-carol")   # a third tab: same person
    assert err.code == "serve.limits.per_owner" and err.field == "session"
    assert "en esta pestaña o en otra" in err.text("es")
    queue.submit(tab3, QUICK, owner="203.0.113.9")                   # someone else, same tab
    assert [r.id for r in queue.runs(tab1)] == [a]                   # sessions still read runs
    assert queue.store.get(a).owner == "cookie-carol"
    queue.cancel(tab1, a)
    queue.submit(tab3, QUICK, owner="cookie-carol")                  # room again
    assert refused(queue.submit, tab1, QUICK, owner="not a person").field == "owner"
    # with no owner, the session is the person (as before owners existed)
    queue.submit(ALICE, QUICK)
    assert queue.store.counts(owner=ALICE)["queued"] == 1


def test_compute_is_bounded_per_run_and_per_person_per_hour(make_queue):
    queue = make_queue(max_per_owner=10, max_image_epochs_per_run=60_000,
                       max_image_epochs_per_owner=100_000, max_epochs=20)
    big = QUICK.replace(train_subset=None, epochs=2, batch_size=4)   # the tutorial's run
    err = refused(queue.submit, ALICE, big)
    assert err.code == "serve.limits.run_image_epochs" and err.field == "epochs"
    assert err.params == {"needed": 100_000, "limit": 60_000, "images": 50_000, "epochs": 2}
    assert "This run needs 100,000 image-epochs (50,000 images × 2 epochs); the limit per run " \
           "on this server is 60,000" in str(err)
    assert "necesita 100.000 imágenes-época" in err.text("es") and "60.000" in err.text("es")

    run = QUICK.replace(train_subset=10_000, epochs=4)               # 40,000 image-epochs
    first = queue.submit(ALICE, run, owner="cookie-dan")
    queue.submit(BOB, run, owner="cookie-dan")                       # another tab: 80,000
    err = refused(queue.submit, ALICE, run, owner="cookie-dan")
    assert err.code == "serve.limits.owner_image_epochs" and err.field == "owner"
    assert err.params == {"needed": 40_000, "used": 80_000, "limit": 100_000, "minutes": 60}
    queue.submit(ALICE, QUICK.replace(train_subset=5_000, epochs=4), owner="cookie-dan")  # fits
    queue.submit(ALICE, run, owner="cookie-eve")                     # another person's budget
    # a run cancelled before it started gave its compute back
    queue.cancel(ALICE, first)
    assert [n for _, n in queue.store.image_epochs_since("cookie-dan", 0)] == [40_000, 20_000]

    # the window: in half an hour nothing has aged out yet; in an hour the oldest has
    created = queue.store.image_epochs_since("cookie-dan", 0)[0][0]
    err = refused(admission.check_owner, queue.store, "cookie-dan", 50_000, queue.settings,
                  now=created + 1800)
    assert err.params["minutes"] == 30 and err.params["used"] == 60_000
    admission.check_owner(queue.store, "cookie-dan", 50_000, queue.settings, now=created + 3601)


def test_a_timing_longer_than_allowed_is_refused_before_it_starts(make_queue):
    queue = make_queue(max_per_owner=5, max_timing_seconds=600)
    err = refused(queue.submit_job, ALICE, "timing", {}, "cpu", exclusive=["cpu"],
                  estimate_s=1500.2)
    assert err.code == "serve.limits.timing_seconds"
    assert err.params == {"estimate": 1501, "limit": 600}
    assert str(err).startswith("This timing would take about 1,501 s, and this server allows "
                               "at most 600 s per timing.")
    assert queue.store.counts()["queued"] == 0
    ok = queue.submit_job(ALICE, "timing", {}, "cpu", exclusive=["cpu"], estimate_s=599)
    assert queue.store.get(ok).holds == ("cpu",)
    queue.submit_job(ALICE, "timing", {}, "cpu")       # no estimate: the worker's limit bounds it


def test_a_training_run_comes_only_through_submit_and_its_checks(make_queue):
    queue = make_queue()
    for kind in ("train", "lr_find"):
        err = refused(queue.submit_job, ALICE, kind, {"config": QUICK.to_dict()}, "cpu")
        assert err.code == "serve.queue.unknown_kind" and kind not in err.params["known"]
    assert queue.store.counts()["queued"] == 0


def test_sessions_never_see_or_touch_each_others_runs(make_queue):
    queue = make_queue()
    a = queue.submit(ALICE, QUICK)
    b = queue.submit(BOB, QUICK)
    assert [r.id for r in queue.runs(ALICE)] == [a]
    assert [r.id for r in queue.runs(BOB)] == [b]
    assert [r.id for r in queue.store.list_runs(ALICE)] == [a]
    timing = queue.submit_job(ALICE, "timing", {}, "cpu")
    assert [r.id for r in queue.runs(ALICE, kind="train")] == [a]
    assert [r.id for r in queue.runs(ALICE, kind="timing")] == [timing]
    assert [r.id for r in queue.runs(ALICE)] == [timing, a]          # newest first
    queue.cancel(ALICE, timing)
    queue.delete(ALICE, timing)
    for call in (queue.get, queue.cancel, queue.delete):
        err = refused(call, ALICE, b)
        assert "no such run" in str(err) and err.field == "run_id"
    assert queue.store.get(b).status == "queued"
    assert queue.cancel(BOB, b) == "cancelled"  # a queued run is cancelled at once
    queue.delete(BOB, b)
    assert queue.store.get(b) is None
    assert "not a run id" in str(refused(queue.cancel, ALICE, "../" + a[3:]))
    # the class view: everyone sees everyone's runs, read-only
    shared = make_queue(shared_view=True)
    c = shared.submit(BOB, QUICK)
    assert {r.id for r in shared.runs(ALICE)} == {a, c}
    assert shared.get(ALICE, c).id == c
    assert not shared.can_control(ALICE, shared.get(ALICE, c))
    assert shared.can_control(BOB, shared.get(BOB, c))
    assert "only change your own" in str(refused(shared.cancel, ALICE, c))


def test_scheduling_is_fifo_per_device_with_slots_and_multi_device_exclusive(make_queue):
    """The scheduler's decisions alone (no processes): devices as a server with a GPU has them."""
    queue = make_queue(cpu_slots=2, gpu_slots=1)
    started = []

    def launch(run):  # stands in for starting a worker process
        assert queue.store.set_status(run.id, "running", only_from=["queued"])
        started.append(run.name)
        return True

    queue.dispatcher._launch = launch
    plan = [("c1", "cpu", False), ("g1", "cuda:0", False), ("c2", "cpu", False),
            ("g2", "cuda:0", False), ("timing", "cuda:0", ["cpu", "cuda:0"]), ("c3", "cpu", False)]
    ids = {name: queue.store.create_run(ALICE, "timing", {}, device, name=name, exclusive=excl)
           for name, device, excl in plan}
    assert queue.store.get(ids["timing"]).holds == ("cpu", "cuda:0")

    def tick_after(*finished):
        for name in finished:
            queue.store.set_status(ids[name], "done")
        started.clear()
        queue.dispatcher._start_queued()
        return list(started)

    assert tick_after() == ["c1", "g1", "c2"]   # two CPU slots, one GPU slot
    assert tick_after("g1") == ["g2"]
    assert tick_after("c1") == []        # the timing job needs the CPU and the GPU idle, and c3,
    assert tick_after("c2") == []        # queued after it, does not overtake it on the CPU
    assert queue.queue_position(ids["c3"]) == 1
    assert tick_after("g2") == ["timing"]
    assert tick_after() == []            # nothing starts beside it on either device
    assert tick_after("timing") == ["c3"]


def _serve_codes():
    """Every "serve.*" code written in cifarlab/serve (or named in cifarlab/errors.py), with
    where."""
    paths = [*sorted((ROOT / "cifarlab" / "serve").glob("*.py")), ROOT / "cifarlab" / "errors.py"]
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and re.fullmatch(r"serve\.[a-z_]+\.[a-z_]+", node.value)):
                yield f"{path.name}:{node.lineno}", node.value


def test_every_serve_code_is_in_every_catalog_with_the_same_placeholders():
    codes = dict((code, where) for where, code in _serve_codes())
    assert len(codes) > 40
    problems = []
    for code, where in codes.items():
        variants = {}
        for lang in i18n.LANGUAGES:
            cat = i18n.catalog(lang)
            keys = [k for k in cat if k == f"errors.{code}" or k.startswith(f"errors.{code}.")]
            if not keys:
                problems.append(f"{where} errors.{code} missing in {lang}")
            variants[lang] = {frozenset(f.split(".")[0] for _, f, _, _ in Formatter().parse(cat[k])
                                        if f) for k in keys}
        if len({frozenset(v) for v in variants.values()}) > 1:
            problems.append(f"errors.{code}: placeholders differ {variants}")
    assert not problems, problems
    # and no serve message left in the catalogs that nothing raises
    unused = [k for k in i18n.catalog("en") if k.startswith("errors.serve.")
              and re.sub(r"\.(one|other)$", "", k)[len("errors."):] not in codes]
    assert not unused, unused


def test_what_a_page_reads_is_checked_against_its_session(make_queue):
    queue = make_queue()
    run_id = queue.submit(ALICE, QUICK)
    queue.store.record(run_id, steps=[1, 2], losses=[2.3, 2.2])
    assert queue.losses(ALICE, run_id) == ([1, 2], [2.3, 2.2])
    assert queue.losses(ALICE, run_id, since_step=1) == ([2], [2.2])
    assert queue.checkpoint(ALICE, run_id).name.startswith(run_id)
    for call in (queue.losses, queue.events, queue.checkpoint):
        with pytest.raises(JobError):
            call("someone-else-entirely", run_id)


def test_measured_speeds_are_this_servers_finished_runs_without_who_ran_them(make_queue):
    """The Train page's time estimate reads these: finished runs' speeds, anyone's, with no
    session or name; queued, failed and unmeasured runs are left out."""
    queue = make_queue()
    store = queue.store
    done = store.create_run("alice-session-1", "train", TrainConfig(epochs=1).to_dict(), "cpu")
    store.set_status(done, "running")
    store.set_status(done, "done", result={"images_per_second": 250.0, "train_seconds": 8.0,
                                           "eval_seconds": 1.5})
    failed = store.create_run("bob-session-22", "train", TrainConfig().to_dict(), "cpu")
    store.set_status(failed, "running")
    store.set_status(failed, "failed", error="boom")
    store.create_run("bob-session-22", "train", TrainConfig().to_dict(), "cpu")   # queued
    (speed,) = queue.measured_speeds()
    assert speed["images_per_second"] == 250.0 and speed["train_seconds"] == 8.0
    assert speed["config"]["epochs"] == 1 and speed["wall_seconds"] >= 0
    assert not {"session", "owner", "name", "id"} & set(speed)
    assert queue.train_images() == 50_000


def test_only_the_owner_names_a_run(make_queue):
    queue = make_queue()
    run_id = queue.submit(ALICE, TrainConfig(epochs=1, train_subset=256), name=" first\ttry ")
    assert queue.get(ALICE, run_id).name == "first try"
    queue.rename(ALICE, run_id, "x" * 300)
    assert queue.get(ALICE, run_id).name == "x" * 100
    queue.rename(ALICE, run_id, "   ")
    assert queue.get(ALICE, run_id).name is None
    err = refused(queue.rename, "mallory-session-9", run_id, "mine now")
    assert err.code == "serve.queue.not_yours"
    assert queue.get(ALICE, run_id).name is None
