"""The class experiment: the instructor's knob and values (typed as text, each refused by knob
and value in the user's language), round-robin values by join order that a rejoining student
keeps, each value locked on submit, a restart and an older store, and the picture's data (the
figure's traces and axes, the CSV). No training: finished runs are written into the store."""
from __future__ import annotations

import csv
import io
import sqlite3

import pytest

from cifarlab import i18n
from cifarlab.core.config import knobs
from cifarlab.lab import classroom as pic
from cifarlab.serve.classroom import tables
from cifarlab.serve.classroom.facade import Classroom
from cifarlab.serve.classroom.model import ClassError, ClassLimits
from cifarlab.serve.store import RunStore
from old_store import old_store
import test_classroom as tc
from test_classroom import ANA, BEN, CAL, QUICK, SID, TEACH, refused
from cifarlab.serve.identity import Person

queue, clock, cr, klass = tc.queue, tc.clock, tc.cr, tc.klass   # the classroom's fixtures

DAN = Person("browser:dan-cookie-4", "Dan")


def run_of(store, code, person, lr, accuracy=None, losses=(2.3, 1.9, 1.5)):
    """A run of ``person`` in the class with this learning rate, its losses and (finished)
    its accuracy."""
    run_id = store.create_run(SID.get(person, "dan-session-4"), "train",
                              QUICK.replace(lr=lr).to_dict(), "cpu", owner=person.id)
    tables.record_run(store, code, person.id, run_id)
    store.set_status(run_id, "running")
    store.record(run_id, steps=range(1, len(losses) + 1), losses=losses)
    if accuracy is not None:
        store.set_status(run_id, "done", result={"test_accuracy": accuracy})
    return run_id


def test_values_go_round_robin_by_join_order_locked_and_kept_on_rejoin(cr, klass, queue):
    info = cr.set_experiment(TEACH, klass.code, "lr", "0.1; 0,01  0.001", klass.version)
    assert info.experiment.values == (0.001, 0.01, 0.1)      # either decimal mark, ascending
    assert info.version == klass.version + 1
    views = {p: cr.student_view(p) for p in (ANA, BEN, CAL)}
    assert [views[p].values["lr"] for p in (ANA, BEN, CAL)] == [0.001, 0.01, 0.1]
    assert all("lr" in v.locked for v in views.values())
    # Dan joins fourth: the first value again; Ana leaves and comes back: hers is kept
    cr.join(DAN, klass.code, "Dan", DAN.id)
    assert cr.student_view(DAN).values["lr"] == 0.001
    cr.leave(ANA)
    cr.join(ANA, klass.code, "Ana", ANA.id)
    assert cr.student_view(ANA).values["lr"] == 0.001
    # the value is a lock on submit: Ben's own passes, another is refused naming the knob
    err = refused(queue.submit, SID[BEN], QUICK.replace(lr=0.001), owner=BEN.id)
    assert isinstance(err, ClassError) and (err.code, err.field) == ("class.knob_locked", "lr")
    assert "0,01" in err.text("es")
    queue.submit(SID[BEN], QUICK.replace(lr=0.01), owner=BEN.id)
    # stopped: the preset as before, nothing locked
    info = cr.set_experiment(TEACH, klass.code, None, expected_version=info.version)
    assert info.experiment is None and "lr" not in cr.student_view(BEN).locked
    assert cr.experiment(BEN) is None


@pytest.mark.parametrize("knob, values, code, needle", [
    ("lr", "0.01; abc", "class.experiment_value", "abc"),
    ("lr", "0.01; 50", "class.experiment_value", "50"),         # over the bounds
    ("batch_size", "4 2.5", "class.experiment_value", "2.5"),   # not a whole number
    ("activation", "relu banana", "class.experiment_value", "banana"),
    ("epochs", "1 3", "class.experiment_value", "3"),           # over the class limit
    ("lr", "", "class.experiment_count", ""),
    ("lr", " ; ;", "class.experiment_count", ""),
    ("lr", "0.1 0.10", "class.experiment_count", ""),            # one value twice
    ("lr", "1 2 3 4 5 6 7 8 9", "class.experiment_count", "9"),
    ("colour", "1 2", "class.experiment_knob", "colour"),
])
def test_bad_experiments_are_refused_in_words(cr, klass, knob, values, code, needle):
    cr.set_limits(TEACH, klass.code, ClassLimits(max_epochs=2), klass.version)
    err = refused(cr.set_experiment, TEACH, klass.code, knob, values)
    assert isinstance(err, ClassError) and err.code == code
    texts = {lang: err.text(lang) for lang in i18n.LANGUAGES}
    assert len(set(texts.values())) == 3 and all("{" not in s for s in texts.values())
    assert all(needle in s for s in texts.values())
    if code == "class.experiment_value":   # the knob's own label and message, in Spanish
        f = next(f for f in knobs() if f.name == knob)
        assert i18n.t(f.knob.label, "es") in texts["es"]
    assert cr.get_class(TEACH, klass.code).experiment is None
    # a student may not set one
    assert refused(cr.set_experiment, ANA, klass.code, "lr", "0.1 0.01").code == \
        "class.not_instructor"


def test_the_preset_and_limits_keep_the_experiment_possible(cr, klass):
    info = cr.set_experiment(TEACH, klass.code, "epochs", "1 3", klass.version)
    assert refused(cr.set_limits, TEACH, klass.code, ClassLimits(max_epochs=2),
                   info.version).code == "class.experiment_value"
    info = cr.set_experiment(TEACH, klass.code, "batch_size", "4 64", info.version)
    assert info.experiment.values == (4, 64)
    # 32 training images take no batch of 64: that preset no longer goes with the experiment
    err = refused(cr.push_preset, TEACH, klass.code, {"train_subset": 32}, [], info.version)
    assert err.code == "class.experiment_value" and "64" in err.text("pt")
    info = cr.set_experiment(TEACH, klass.code, "nesterov", "on off", info.version)
    assert info.experiment.values == (True, False)      # a switch keeps the order typed


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_an_experiments_values_written_for_its_form_read_back_the_same(cr, klass, lang):
    """The console's form opens with the running experiment's values in the language's own
    decimals: set again as they stand, they are the same values."""
    version = klass.version
    for knob, typed in (("lr", "0.0001 0.0125 1"), ("momentum", "0.5 0.95"),
                        ("batch_size", "4 64"), ("activation", "relu tanh"),
                        ("nesterov", "on off")):
        info = cr.set_experiment(TEACH, klass.code, knob, typed, version)
        text = pic.values_text(info.experiment, lang)
        again = cr.set_experiment(TEACH, klass.code, knob, text, info.version)
        assert again.experiment.values == info.experiment.values, (knob, text)
        version = again.version
    assert pic.values_text(again.experiment, "en") == "True; False"
    assert pic.values_text(cr.set_experiment(TEACH, klass.code, "lr", "0.0001 0.0125", version)
                           .experiment, "es") == "0,0001; 0,0125"


def test_the_experiment_survives_a_restart_and_an_older_store_migrates(tmp_path):
    old = old_store(tmp_path / "runs.db", version=4)
    code = Classroom(old).create_class(TEACH, "Period 3").code
    for p, t in ((BEN, 2.0), (ANA, 1.0)):    # Ana joined first
        Classroom(old).join(p, code, p.name, p.id)
        with old._write() as c:
            c.exec_driver_sql("UPDATE class_members SET joined_at = ? WHERE person = ?",
                              (t, p.id))
    old.close()
    conn = sqlite3.connect(tmp_path / "runs.db")   # as a CIFAR Lab at version 4 left it
    conn.execute("ALTER TABLE class_members DROP COLUMN slot")
    conn.execute("ALTER TABLE classes DROP COLUMN experiment")
    conn.commit()
    conn.close()
    store = RunStore(tmp_path / "runs.db")
    room = Classroom(store)
    # in the order they joined
    assert [room.student_view(p).membership.slot for p in (ANA, BEN)] == [0, 1]
    info = room.set_experiment(TEACH, code, "batch_size", "4 16", 1)
    store.close()
    again = Classroom(RunStore(tmp_path / "runs.db"))
    assert again.get_class(TEACH, code) == info
    assert [again.student_view(p).values["batch_size"] for p in (ANA, BEN)] == [4, 16]


def test_the_picture_draws_each_value_and_marks_the_students_own_run(cr, klass, queue):
    info = cr.set_experiment(TEACH, klass.code, "lr", "0.0001 0.01 1", klass.version)
    store = queue.store
    run_of(store, klass.code, ANA, 0.0001, 0.21)
    run_of(store, klass.code, BEN, 0.01, 0.48)
    run_of(store, klass.code, CAL, 1.0)                         # still training
    view = cr.experiment(BEN)
    assert {r.nickname: r.value for r in view.rows} == {"Ana": 0.0001, "Ben": 0.01, "Cal": 1.0}
    assert [r.nickname for r in view.rows if r.you] == ["Ben"]
    assert all(bool(r.run_id) == r.you for r in view.rows)      # no classmate's run id
    fig = pic.experiment_figure(view, "es")
    curves = [d for d in fig.data if d.mode == "lines" and d.yaxis == "y"]
    assert len(curves) == 3 and [d.name for d in sorted(curves, key=lambda d: d.legendrank)] \
        == ["0,0001", "0,01", "1"]
    assert fig.layout.legend.title.text == "Tasa de aprendizaje"
    thick = [d for d in curves if d.line.width == 5]
    assert len(thick) == 1 and thick[0].customdata[0][0] == "Ben (tú)"
    assert len({d.line.color for d in curves}) == 3
    points = [d for d in fig.data if d.mode and "markers" in d.mode]
    assert sorted((d.x[0], d.y[0], d.text[0]) for d in points) == [
        (0.0001, pytest.approx(21.0), "Ana"), (0.01, pytest.approx(48.0), "Ben (tú)")]
    assert fig.layout.xaxis2.type == "log" and fig.layout.separators == ",."
    assert list(fig.layout.xaxis2.ticktext) == ["0,0001", "0,01", "1"]
    # older runs of the class, before the experiment, are not in it
    assert len(cr.experiment(TEACH, klass.code).rows) == 3
    # a switch: categories in words, no log axis
    cr.set_experiment(TEACH, klass.code, "nesterov", "off on", info.version)
    fig = pic.experiment_figure(cr.experiment(TEACH, klass.code), "pt")
    assert fig.layout.xaxis2.type == "category" and list(fig.layout.xaxis2.categoryarray) == [
        "Não", "Sim"]


def test_the_csv_has_one_row_per_run_and_no_ids(cr, queue):
    info = cr.create_class(TEACH, "Period 3")
    cr.join(ANA, info.code, "Ana", ANA.id)
    cr.join(BEN, info.code, "Ben", BEN.id)
    cr.set_experiment(TEACH, info.code, "lr", "0.001 0.01", info.version)
    a = run_of(queue.store, info.code, ANA, 0.001, 0.3)
    run_of(queue.store, info.code, BEN, 0.01)
    text = pic.experiment_csv(cr.experiment(TEACH, info.code))
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == list(pic.CSV_COLUMNS)
    assert rows[1] == ["lr", "0.001", "Ana", "1", "done", "0.300000", "1.5", "3"]
    assert rows[2][:6] == ["lr", "0.01", "Ben", "1", "running", ""]
    assert a not in text and ANA.id not in text


def test_log_axis_only_for_a_wide_positive_range():
    assert pic.log_axis([0.0001, 0.01, 1]) and pic.log_axis([0.01, 1])
    assert not pic.log_axis([4, 16, 64]) and not pic.log_axis([0, 0.1, 1])
    assert not pic.log_axis([True, False]) and not pic.log_axis(["relu", "gelu"])
