"""The CPU vs GPU page on a busy machine (cifarlab/lab/gpu/analysis.py, report.py): busy-ness from
the load, from the measurement's own repeats and from the server's finished runs; said first,
with no extrapolation headlined; machines named so a person can tell them apart."""
from __future__ import annotations

import pytest

from cifarlab import i18n
from cifarlab.core.config import TrainConfig
from cifarlab.lab.gpu import analysis, report
from cifarlab.lab.gpu.results import COLUMNS, SweepResult

XEON = "Intel(R) Xeon(R) Processor (16 cores)"
EPYC = "AMD EPYC (2 cores)"


def row(device, batch, ips, pipeline="tutorial", spread=1.05, load=0.1, name=EPYC):
    r = {c: ("" if t is str else False if t is bool else None) for c, t in COLUMNS.items()}
    step = 1000 * batch / ips
    r.update(device=device, device_kind=device.split(":")[0], device_name=name,
             pipeline=pipeline, batch_size=batch, width=1, host="vm", num_workers=2,
             recorded_at="2026-11-26T20:00:00+00:00", load_1m=load, repeats=3,
             tutorial_point=(pipeline, batch) == ("tutorial", 4), images_per_s=float(ips),
             step_ms=step, step_ms_min=step, step_ms_max=step * spread, epoch_s=50_000 / ips)
    return r


def timing(tut_ips=274.0, spread=1.05, load=0.1, cpu=EPYC, gpu=None) -> SweepResult:
    """A timing of this machine: the tutorial's point, batch 4 and 256 of the fast pipeline."""
    rows = [row("cpu", 4, tut_ips, spread=spread, load=load, name=cpu),
            row("cpu", 4, tut_ips * 1.3, "fast", spread, load, cpu),
            row("cpu", 256, tut_ips * 9, "fast", spread, load, cpu)]
    devices = [{"id": "cpu", "kind": "cpu", "name": cpu}]
    if gpu:
        rows += [row("cuda:0", 4, tut_ips / 2, spread=spread, load=load, name=gpu),
                 row("cuda:0", 4, tut_ips, "fast", spread, load, gpu),
                 row("cuda:0", 256, tut_ips * 40, "fast", spread, load, gpu)]
        devices.append({"id": "cuda:0", "kind": "cuda", "name": gpu, "memory_bytes": 80 * 2**30})
    env = {"cpu": cpu, "cpu_count": 2, "settings": {"torch_threads": 2}, "devices": devices,
           "load_average_start": [load] * 3}
    return SweepResult(rows=rows, environment=env, config={}, host="vm",
                       recorded_at="2026-11-26T20:00:00+00:00")


def finished(ips, seconds, device="cpu", **knobs):
    """One of this server's finished training runs, as ``JobQueue.measured_speeds`` gives it."""
    return {"config": TrainConfig(**knobs).to_dict(), "device": device,
            "images_per_second": ips, "train_seconds": seconds, "wall_seconds": seconds + 9}


def test_a_quiet_timing_is_not_busy():
    judged = analysis.assess(timing(), [finished(274.0, 365.0)])
    assert judged["busy"] is False and judged["reasons"] == []
    assert judged["spread"] == pytest.approx(1.05)
    assert judged["runs"]["ratio"] == pytest.approx(1.0) and judged["runs"]["run_s"] == 365.0


def test_busy_from_the_load_average():
    assert analysis.assess(timing(load=9.0))["reasons"] == ["load"]


def test_busy_from_the_measurements_own_spread():
    """No load recorded (an upload from a machine without one) and yet the repeats disagree."""
    res = timing(spread=2.4)
    res.environment.pop("load_average_start")
    for r in res.rows:
        r["load_1m"] = None
    judged = analysis.assess(res)
    assert judged["reasons"] == ["spread"] and judged["spread"] == pytest.approx(2.4)
    single = timing(spread=2.4)
    for r in single.rows:
        r["repeats"] = 1                          # one repeat has no spread to judge
    assert analysis.spread(single) is None


def test_busy_when_the_servers_own_runs_were_much_faster():
    """The issue's case: "Time it" said 16 images/s minutes after the run trained at 274."""
    runs = [finished(274.0, 365.0), finished(280.0, 40.0, epochs=1, train_subset=5000),
            finished(2000.0, 50.0, batch_size=64),          # other settings: not compared
            finished(9000.0, 11.0, device="cuda:0")]         # other device: not compared
    judged = analysis.assess(timing(tut_ips=16.0), runs)
    assert judged["reasons"] == ["runs"]
    check = judged["runs"]
    assert check["runs"] == 2 and check["run_ips"] == pytest.approx(277.0)
    assert check["ratio"] == pytest.approx(16 / 277) and check["run_s"] == 365.0
    # a result recorded on another machine is never checked against this server's runs
    elsewhere = timing(tut_ips=16.0)
    elsewhere.source = "h100.json"
    assert analysis.assess(elsewhere, runs)["runs"] is None


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_busy_is_said_first_and_no_extrapolation_is_headlined(lang):
    t = i18n.translator(lang)
    res = timing(tut_ips=16.0, spread=2.0, load=9.0, gpu="NVIDIA H100 80GB HBM3")
    runs = [finished(274.0, 365.0)]
    judged = analysis.assess(res, runs)
    assert judged["reasons"] == ["load", "spread", "runs"]
    where = report.provenance(res, lang, judged)
    assert where["busy"].startswith(t("gpu_busy.headline"))
    assert i18n.number(274, lang) in where["busy"] and i18n.duration(365.0, lang) in where["check"]
    lines = report.tutorial_lines(res, lang, judged["busy"])
    quiet_lines = report.tutorial_lines(res, lang)
    two_epochs = i18n.duration(2 * 50_000 / 16.0, lang)          # "1 h 44 min"
    assert any(two_epochs in line for line in quiet_lines)       # what used to be headlined
    assert not any(two_epochs in line for line in lines)
    cpu = report.md(report.in_words(EPYC, lang))        # its cores counted in the language
    assert lines[0] == t("gpu_busy.tut_measured", device="cpu", name=cpu, ips=16)
    assert not any(line.startswith("- ") for line in lines)      # no best batch, no gains
    assert report.crossover_lines(res, "fast", lang, True) == [t("gpu_busy.no_crossover")]
    assert report.crossover_lines(res, "fast", lang) != [t("gpu_busy.no_crossover")]
    assert report.provenance(timing(), lang)["busy"] is None


def test_two_virtual_machines_get_names_a_person_can_tell_apart():
    here, there = timing(), timing(cpu=XEON, gpu="NVIDIA H100 80GB HBM3")
    assert here.host == there.host == "vm"
    assert report.machine_label(here, markdown=False) == EPYC
    assert report.machine_label(there, markdown=False) == \
        "Intel Xeon Processor (16 cores) + NVIDIA H100 80GB HBM3"
    there.source = "h100.json"
    assert "NVIDIA H100" in report.source_label(there, "es") and "vm" not in report.source_label(
        there, "es")
    nothing = SweepResult(rows=[], environment={}, config={}, host="lab-7", recorded_at="")
    assert report.machine_label(nothing, markdown=False) == "lab-7"



def test_the_machines_cores_are_counted_in_the_students_language():
    """core.devices writes "(16 cores)" into a recording; the page says it in the language."""
    there = timing(cpu=XEON, gpu="NVIDIA H100 80GB HBM3")
    assert report.machine_label(there, markdown=False, lang="es") == \
        "Intel Xeon Processor (16 núcleos) + NVIDIA H100 80GB HBM3"
    assert report.machine_label(there, markdown=False, lang="pt").startswith(
        "Intel Xeon Processor (16 núcleos)")
    one = timing(cpu="Tiny CPU (1 cores)")
    assert report.machine_label(one, markdown=False) == "Tiny CPU (1 core)"
    assert report.machine_label(one, markdown=False, lang="es") == "Tiny CPU (1 núcleo)"
    there.source = "h100.json"
    assert "16 núcleos" in report.source_label(there, "es")
