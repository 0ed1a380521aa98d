"""What the CPU vs GPU page says, in the student's language; text from a file is escaped (md)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from cifarlab import i18n
from cifarlab.i18n import number
from cifarlab.core.safe_text import md_escape as md
from cifarlab.core.safe_text import one_line
from cifarlab.errors import CifarLabError, ConfigError
import cifarlab.lab.gpu.analysis as analysis
from cifarlab.lab.gpu.config import (EPOCH_IMAGES, TUTORIAL_POINT, SweepConfig, estimate_seconds,
                                    time_left)
from cifarlab.lab.gpu.results import OOM, SweepResult


def error_text(err: CifarLabError, lang: str) -> str:
    """An error's message in ``lang`` for Markdown, its text parameters (file names) escaped."""
    if isinstance(err, ConfigError):
        return err.text(lang)
    return i18n.t(f"errors.{err.code}", lang,
                  **{k: md(v) if isinstance(v, str) else v for k, v in err.params.items()})


def times(x: float | None, lang: str) -> str:
    """A speed-up factor: 2 decimals below 10, 1 below 100, whole numbers above."""
    return "–" if x is None else number(x, lang, 2 if x < 10 else 1 if x < 100 else 0)


def pipeline_name(p: str, lang: str) -> str:
    return i18n.t(f"gpu.pipe_{p}", lang)


CORES = re.compile(r" \((\d+) cores\)")   # how core.devices.cpu_name writes the count


def in_words(name: str, lang: str) -> str:
    """A device's or machine's recorded name with its CPU cores counted in ``lang``."""
    return CORES.sub(lambda m: " (" + i18n.t("gpu.cores", lang, n=int(m[1])) + ")", name)


def _cpu(res: SweepResult) -> str | None:
    return (res.environment or {}).get("cpu") or next(
        (r["device_name"] for r in res.rows if r["device"] == "cpu"), None)


def _gpus(res: SweepResult) -> list[dict]:
    """The GPUs measured; from the rows where a CSV lost its first line."""
    gpus = [d for d in (res.environment or {}).get("devices", []) if d.get("kind", "cpu") != "cpu"]
    return gpus or [{"id": r["device"], "name": r["device_name"],
                     "memory_bytes": r["device_memory_bytes"]}
                    for r in {r["device"]: r for r in res.rows if r["device"] != "cpu"}.values()]


def machine_label(res: SweepResult, markdown: bool = True, lang: str = "en") -> str:
    """The machine by its CPU and GPUs ("AMD EPYC (2 cores) + NVIDIA H100"), not its host name
    (virtual machines are all "vm"); plain text for a widget."""
    cpu = re.sub(r"\((R|TM)\)", "", _cpu(res) or "").replace("  ", " ").strip()
    gpus = [g.get("name") for g in _gpus(res) if g.get("name") and g.get("name") != _cpu(res)]
    label = in_words(" + ".join(p for p in [cpu, *dict.fromkeys(gpus)] if p) or res.host or "?",
                     lang)
    return md(label) if markdown else one_line(label)


def rows_table(rows: list[dict], lang: str) -> pd.DataFrame:
    """The measured points; "vs CPU" against the CPU of the same rows (one recording)."""
    t, out = i18n.translator(lang), []
    graphed = t("gpu.graphed_tag")
    ups = {(s["device"], s["graphed"], *analysis.point_key(s)): s["speedup"]
           for s in analysis.speedups(rows)}
    for r in rows:
        ok = not r["error"]
        up = ups.get((r["device"], bool(r.get("graphed")), *analysis.point_key(r)))
        notes = [t("gpu.tut_marker")] if r["tutorial_point"] else []
        if r.get("budget_hit"):
            notes.append(t("gpu.note_budget", n=r["timed_steps"]))
        if r["error"]:
            notes.append(t("gpu.out_of_memory") if r["error"] == OOM else r["error"])
        out.append({
            t("gpu.device_col"): f"{r['device']} · {graphed}" if r.get("graphed") else r["device"],
            t("gpu.pipeline_col"): pipeline_name(r["pipeline"], lang),
            t("gpu.batch_col"): r["batch_size"], t("gpu.width_col"): r["width"],
            t("gpu.ips_col"): round(r["images_per_s"], 1) if ok else None,
            t("gpu.step_col"): round(r["step_ms"], 3) if ok else None,
            t("gpu.spread_col"): (f"{number(r['step_ms_min'], lang, 3)} – "
                                  f"{number(r['step_ms_max'], lang, 3)}" if ok else ""),
            t("gpu.epoch_col"): i18n.duration(r["epoch_s"], lang) if ok else "",
            t("gpu.speedup_col"): None if up is None else round(up, 2),
            t("gpu.note_col"): "; ".join(notes),
        })
    return pd.DataFrame(out)


def cudnn_text(version: Any) -> Any:
    """torch's cuDNN version number as its release is named: 91900 -> "9.19.0", 8907 -> "8.9.7"
    (from cuDNN 9 the minor version takes two digits)."""
    if not isinstance(version, int) or isinstance(version, bool) or version <= 0:
        return version
    major, rest = divmod(version, 10000) if version >= 90000 else divmod(version, 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def hardware_table(res: SweepResult, lang: str) -> pd.DataFrame:
    """What it was measured on and with, for ``st.table`` (whose cells are Markdown: escaped)."""
    t = i18n.translator(lang)
    env, cfg, first = res.environment or {}, res.config or {}, (res.rows or [{}])[0]
    settings = env.get("settings") or {}

    def known(v: Any) -> str:
        return t("gpu.none") if v is None or v == "" else str(v)

    threads = settings.get("torch_threads", env.get("torch_threads"))
    items = [(t("gpu.hw_machine"), known(res.host or env.get("hostname"))),
             (t("gpu.hw_date"), known(res.recorded_at.replace("T", " ")[:19])),
             (t("gpu.hw_cpu"), t("gpu.hw_cpu_value", name=known(_cpu(res)),
                                 threads="?" if threads is None else threads))]
    items += [(t("gpu.hw_gpu", device=known(g.get("id"))),
               t("gpu.hw_gpu_value", name=known(g.get("name")),
                 memory=number(g["memory_bytes"] / 2**30, lang, 0) if g.get("memory_bytes")
                 else "?")) for g in _gpus(res)]
    items += [(t("gpu.hw_torch"), known(env.get("torch") or first.get("torch"))),
              (t("gpu.hw_cuda"), f"{known(env.get('cuda') or first.get('cuda'))} / "
                                 f"{known(cudnn_text(env.get('cudnn')))}")]
    if cfg:
        items.append((t("gpu.hw_settings"), t(
            "gpu.hw_settings_value", steps=known(cfg.get("steps")),
            repeats=known(cfg.get("repeats")), warmup=known(cfg.get("warmup")),
            workers=known(cfg.get("num_workers")),
            budget=number(cfg["max_seconds"], lang, 1) if cfg.get("max_seconds") else "∞")))
    loads = [env.get("load_average_start"), env.get("load_average_end")]
    if any(loads):
        items.append((t("gpu.hw_load"), " → ".join(number(x[0], lang, 2) if x else "?"
                                                   for x in loads)))
    if flags := {k: v for k, v in settings.items() if k != "torch_threads"}:
        items.append((t("gpu.hw_flags"), ", ".join(f"{k}={v}" for k, v in flags.items())))
    return pd.DataFrame([(md(k), md(v)) for k, v in items],
                        columns=[t("gpu.hw_item"), t("gpu.hw_value")])


def download_stem(res: SweepResult) -> str:
    """A download's file name by its date (host names say little: virtual machines are "vm")."""
    return f"cifarlab-timing-{re.sub(r'[^0-9-]', '', res.recorded_at[:10]) or 'result'}"


def provenance(res: SweepResult, lang: str, judged: dict | None = None) -> dict:
    """Where and when it was measured, why the machine was busy and the runs' cross-check."""
    t = i18n.translator(lang)
    judged = judged or analysis.assess(res)
    label = t("gpu.recorded_elsewhere" if res.recorded_elsewhere else "gpu.this_machine",
              machine=machine_label(res, lang=lang), date=res.recorded_at[:10])
    load, runs = judged["load"], judged["runs"]
    why = {"load": lambda: t("gpu_busy.load", load=number(load["load"], lang, 1),
                             cores=load["cores"], others=number(load["others"], lang, 1)),
           "spread": lambda: t("gpu_busy.spread", x=times(judged["spread"], lang)),
           "runs": lambda: t("gpu_busy.runs", device=md(runs["device"]),
                             timed=number(runs["timed_ips"], lang, 0),
                             ran=number(runs["run_ips"], lang, 0))}
    text = (" ".join([t("gpu_busy.headline")] + [why[r]() for r in judged["reasons"]])
            if judged["busy"] else None)
    check = None
    if runs is not None:
        check = t("gpu_busy.check", device=md(runs["device"]), ips=number(runs["run_ips"], lang, 0),
                  runs=t("counts.runs", n=runs["runs"]))
        if runs["run_s"]:
            check += " " + t("gpu_busy.check_two_epochs", time=i18n.duration(runs["run_s"], lang))
    return {"elsewhere": res.recorded_elsewhere, "label": label, "busy": text, "check": check}


def source_label(res: SweepResult, lang: str) -> str:
    """A recorded result as an option of the page's choice (plain text)."""
    return i18n.t("gpu.source_recorded", lang, date=res.recorded_at[:10],
                  file=Path(res.source).name,
                  machine=machine_label(res, markdown=False, lang=lang))


def tutorial_lines(res: SweepResult, lang: str, is_busy: bool = False) -> list[str]:
    """The tutorial's point on each device against the CPU; when busy, nothing extrapolated."""
    t = i18n.translator(lang)
    tut = {r["device"]: r for r in analysis.eager(res.ok_rows())
           if analysis.point_key(r) == TUTORIAL_POINT}
    if not tut:
        return []
    why = t("gpu.tut_why", params=next((r["params"] for r in tut.values() if r["params"]), 62006))
    name = lambda d: md(in_words(tut[d]["device_name"], lang))  # noqa: E731 - local shorthands
    ips = lambda d: round(tut[d]["images_per_s"])  # noqa: E731
    if is_busy:
        return [t("gpu_busy.tut_measured", device=md(d), name=name(d), ips=ips(d))
                for d in tut] + [why]
    run = lambda d: i18n.duration(2 * tut[d]["epoch_s"], lang)  # noqa: E731 - the 2 epochs
    lines, cpu = [], tut.get("cpu")
    if cpu:
        lines.append(t("gpu.tut_cpu", name=name("cpu"), ips=ips("cpu"), images=EPOCH_IMAGES,
                       epoch=i18n.duration(cpu["epoch_s"], lang), run=run("cpu")))
        lines += [t("gpu.tut_acc", device=md(d), name=name(d), ips=ips(d), run=run(d),
                    x=times(r["images_per_s"] / cpu["images_per_s"], lang))
                  for d, r in tut.items() if d != "cpu"]
    return lines + [why]


def crossover_lines(res: SweepResult, pipeline: str, lang: str, is_busy: bool = False
                    ) -> list[str]:
    """Where each accelerator starts beating the CPU, in sentences (never from a busy machine)."""
    t, lines = i18n.translator(lang), []
    if is_busy:
        return [t("gpu_busy.no_crossover")]
    for c in [c for c in analysis.crossover(res) if c["pipeline"] == pipeline]:
        dev = md(c["device"]) + (" · " + t("gpu.graphed_tag") if c.get("graphed") else "")
        common = dict(device=dev, pipeline=pipeline_name(c["pipeline"], lang),
                      width=c["width"], best=times(c["max_speedup"], lang),
                      best_batch=c["max_batch_size"])
        if c["batch_size"] is None:
            lines.append(t("gpu.crossover_never", **common))
        else:
            est = t("gpu.crossover_estimate", n=round(c["estimate"])) if c["estimate"] else ""
            lines.append(t("gpu.crossover_at", batch=c["batch_size"],
                           x=times(c["speedup"], lang), estimate=est, **common))
    return lines


def graph_gain_lines(res: SweepResult, lang: str) -> list[str]:
    """The "GPU, graphed" series against the same GPU eager, one sentence per point."""
    t = i18n.translator(lang)
    return [t("gpu.graphs_gain", device=md(g["device"]), batch=g["batch_size"], width=g["width"],
              x=times(g["gain"], lang), graphed_ms=g["step_ms"], eager_ms=g["eager_step_ms"])
            for g in analysis.graph_gains(res)]


def would_add_lines(recorded: list[SweepResult], lang: str) -> list[str]:
    """What a GPU would add: the newest recording with one, against its own machine's CPU."""
    t = i18n.translator(lang)
    ref = next((r for r in recorded if any(x["device"] != "cpu" for x in r.ok_rows())), None)
    ups = analysis.speedups(analysis.eager(ref.ok_rows())) if ref else []
    if not ups:
        return [t("gpu.would_add_none")]
    acc = next(r for r in analysis.eager(ref.ok_rows()) if r["device"] != "cpu")
    where = dict(gpu=md(in_words(acc["device_name"], lang)),
                 machine=machine_label(ref, lang=lang), date=ref.recorded_at[:10])
    out = []
    if tut := next((p for p in ups if analysis.point_key(p) == TUTORIAL_POINT), None):
        out.append(t("gpu.would_add_same", x=times(tut["speedup"], lang), **where))
    b = max(ups, key=lambda p: p["speedup"])
    return out + [t("gpu.would_add_best", batch=b["batch_size"], width=b["width"],
                    pipeline=pipeline_name(b["pipeline"], lang), x=times(b["speedup"], lang))]


def plan_text(config: SweepConfig, lang: str) -> str:
    """What a sweep will measure and how long it may take, before it runs."""
    devices = list(config.devices)
    passes = len(config.breakdown_passes(devices))
    total = estimate_seconds(config, devices)
    return i18n.t("gpu.plan_passes" if passes else "gpu.plan", lang, passes=passes,
                  points=len(config.points(devices)), devices=", ".join(devices),
                  budget=float(config.max_seconds), total=i18n.duration(total, lang))


def live_lines(run, rows: list[dict], position: int | None, now: float,
               lang: str) -> tuple[list[tuple[str, str]], float | None]:
    """A timing run as [(st's function name, text)] and the share of its points done."""
    t, cfg = i18n.translator(lang), SweepConfig.from_dict(run.config)
    total = len(cfg.points(list(cfg.devices)))
    if run.status == "queued":
        return [("info", t("gpu.queued", device=run.device, n=position or 1))], None
    if not rows and run.started_at is None:
        return [("info", t("gpu.starting"))], None
    lines = []
    if (run.waited_s or 0) >= 1.0:
        lines.append(("warning", t("gpu.waited", seconds=i18n.duration(run.waited_s, lang),
                                   device=run.device)))
    lines.append(("info", t("gpu.running", devices=", ".join(cfg.devices), done=len(rows),
                            total=total) if len(rows) < total
                  else t("gpu.running_breakdown", total=total)))
    left = time_left(cfg, len(rows), now - (run.started_at or now), list(cfg.devices))
    if left is not None:
        lines.append(("caption", t("gpu.time_left", time=i18n.duration(left, lang))))
    return lines, min(1.0, len(rows) / max(1, total))
