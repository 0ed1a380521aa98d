"""The Train page's live view in figures and words. A figure whose layout still fits is updated
in place, and none carries plotly's template (most of its bytes): docs/benchmarks.md, 7."""
from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from cifarlab import i18n
from cifarlab.i18n import duration, number, percent
from cifarlab.core.probes import finite, signals
from cifarlab.lab import eta
from cifarlab.lab.charts import series_style, title_over_legend
from cifarlab.lab.classroom import status_text as status_word
from cifarlab.lab.train import time_split

GREY, BLUE, RED, ORANGE = "#888", "#3d7dca", "#ff4b4b", "#f0a202"


def layout(lang: str, title: str, **kw) -> dict:
    """The Train page's charts: the title, then the legend, in the top margin."""
    return dict(template="none", separators=i18n.separators(lang),
                **title_over_legend(title, 92), **kw)


def loss_figure(chart: Mapping[str, Any], lang: str, old: tuple | None = None) -> tuple:
    """(layout key, figure) of ``RunView.chart()``; ``old`` updated in place while its key fits."""
    t = i18n.translator(lang)
    key = (lang, bool(chart["running_steps"]), tuple(chart["epoch_marks"]), chart["stride"])
    running = (np.asarray(chart["running_steps"], dtype=np.int32),
               np.asarray(chart["running_losses"], dtype=np.float32))
    if old is not None and old[0] == key:
        with old[1].batch_update():
            old[1].data[0].x, old[1].data[0].y = chart["steps"], chart["losses"]
            if chart["running_steps"]:
                old[1].data[1].x, old[1].data[1].y = running
        return old
    data = [go.Scatter(x=chart["steps"], y=chart["losses"], mode="lines",
                       name=step_series_name(chart["stride"], lang),
                       line=dict(width=1, color="#7f9fbf"))]
    if chart["running_steps"]:
        data.append(go.Scatter(x=running[0], y=running[1], mode="lines+markers",
                               name=t("train.running_loss"), line=dict(width=2, color=RED)))
    if chart["val"]:   # the gap is what the network did not learn for images it never saw
        x, train, held = zip(*chart["val"])
        data += [go.Scatter(x=x, y=train, mode="lines+markers", name=t("train.val_train_series"),
                            line=dict(width=2, color=BLUE), marker=dict(size=9)),
                 go.Scatter(x=x, y=held, mode="lines+markers", name=t("train.val_val_series"),
                            line=dict(width=2, color=ORANGE, dash="dash"),
                            marker=dict(size=9, symbol="diamond"))]
    marks = chart["epoch_marks"]
    # shapes, not add_vline: that alone costs more than all the rest of the figure
    shapes = [dict(type="line", x0=x, x1=x, xref="x", y0=0, y1=1, yref="y domain",
                   line=dict(dash="dot", color=GREY, width=1)) for x in marks]
    notes = [dict(x=x, xref="x", y=1, yref="y domain", text=t("train.chart_epoch_end", n=i),
                  showarrow=False, xanchor="right", yanchor="top")
             for i, x in enumerate(marks, 1)]
    return key, go.Figure(data=data, layout=layout(
        lang, t("train.loss_curve"), height=380, xaxis_title=t("common.step"),
        yaxis_title=t("common.loss"), uirevision="loss", shapes=shapes, annotations=notes))


def validation_caption(epochs: Sequence[Mapping[str, Any]], lang: str) -> str | None:
    """What the last validation gap means, in words; None without validation."""
    done = [e for e in epochs if e.get("val_loss") is not None and e.get("mean_loss") is not None]
    if not done:
        return None
    t = i18n.translator(lang)
    last, vals = done[-1], [float(e["val_loss"]) for e in done]
    words = {"val": i18n.significant(vals[-1], lang), "train": i18n.significant(
        float(last["mean_loss"]), lang)}
    best = int(np.argmin(vals))
    if best < len(vals) - 1 and vals[-1] > vals[best] * 1.02:
        return t("train.val_gap_over", best=done[best]["epoch"], **words)
    if vals[-1] > float(last["mean_loss"]) * 1.1:
        return t("train.val_gap_wide", **words)
    return t("train.val_gap_close", **words)


def step_series_name(stride: int, lang: str) -> str:
    """The step losses' name in the legend and the caption (a mean once points merge)."""
    t = i18n.translator(lang)
    return t("train.chart_step_loss_mean", n=stride) if stride > 1 else t("train.chart_step_loss")


def split_figure(split: Mapping[str, float], lang: str, old: tuple | None = None) -> tuple:
    """(language, figure): ``time_split``'s data wait and compute as one stacked bar."""
    t = i18n.translator(lang)
    values = (split["data_wait_s"], split["compute_s"])
    if old is not None and old[0] == lang:
        with old[1].batch_update():
            for bar, value in zip(old[1].data, values):
                bar.x, bar.text = (value,), (duration(value, lang),)
        return old
    bars = [go.Bar(y=[""], x=[value], orientation="h", name=label, marker_color=color,
                   text=[duration(value, lang)], textposition="inside")
            for value, label, color in zip(values, (t("train.data_wait"), t("train.compute")),
                                           (ORANGE, BLUE))]
    return lang, go.Figure(data=bars, layout=layout(
        lang, t("train.data_wait_vs_compute"), barmode="stack", height=242,
        xaxis_title=t("common.time") + " (s)", showlegend=True))


def epochs_table(epochs: Sequence[Mapping[str, Any]], lang: str) -> pd.DataFrame:
    """The epoch events as a table of texts (``st.table`` scrolls inside itself on a phone)."""
    t = i18n.translator(lang)
    head = [t("train.epoch_col"), t("train.mean_loss_col"), t("train.seconds_col"),
            t("train.ips_col"), t("common.accuracy")]
    rows = [[str(e.get("epoch")), _loss(e.get("mean_loss"), lang),
             number(round(float(e.get("seconds") or 0), 1), lang),
             number(round(float(e.get("images_per_second") or 0)), lang),
             percent(e.get("accuracy"), lang)] for e in epochs]
    if any("val_loss" in e for e in epochs):   # a run with a validation split
        head[2:2] = [t("train.val_loss_col"), t("train.val_accuracy_col")]
        for row, e in zip(rows, epochs):
            row[2:2] = [_loss(e.get("val_loss"), lang), percent(e.get("val_accuracy"), lang)]
    return pd.DataFrame(rows, columns=head)


def _loss(value, lang: str) -> str:
    return "–" if value is None else number(round(float(value), 4), lang)


def chart_texts(view: Any, log_every: int, lang: str) -> tuple[str, str]:
    """The loss chart's caption and the tutorial's own print-out (``[1,  2000] loss: 2.183``)."""
    t = i18n.translator(lang)
    caption = t("train.chart_caption", series=step_series_name(view.series.stride, lang),
                running=t("train.running_loss"), n=log_every)
    spe = view.steps_per_epoch
    if not view.running and spe and spe < log_every:
        caption += "  \n" + t("train.running_loss_none", n=log_every, steps=spe)
    if n_val := (view.start or {}).get("n_val"):
        caption += "  \n" + (validation_caption(view.epochs, lang)
                             or t("train.val_held", n=n_val))
    return caption, "\n".join(t("train.running_loss_line", epoch=r["epoch"], i=f"{r['i']:5d}",
                                loss=f"{r['loss']:.3f}") for r in view.running)


def status_text(run: Any, position: int | None, lang: str) -> str:
    t = i18n.translator(lang)
    if run.status == "queued":
        return t("status.queued", n=position or 1)
    if run.status == "running" and run.cancel_requested:
        return t("status.cancelling")
    return t(f"status.{run.status}")


def run_label(run: Any, lang: str, full_images: int) -> str:
    t, c = i18n.translator(lang), run.config or {}
    images = c.get("train_subset") or full_images
    when = time.strftime("%H:%M:%S", time.localtime(run.created_at))
    epochs = c.get("epochs")
    summary = t("train.run_summary", batch=c.get("batch_size", "?"),
                epochs=t("counts.epochs", n=epochs) if isinstance(epochs, int) else "?",
                lr=c.get("lr", 0), images=number(int(images), lang))
    return " · ".join(([run.name] if run.name else [])
                      + [when, status_word(run.status, lang), summary])


def progress_lines(prog: Mapping[str, Any], progress: Mapping[str, Any] | None,
                   waited_s: float | None, lang: str) -> tuple:
    """The progress bar's text (step of total, ``eta``'s time left) and the speed line."""
    t = i18n.translator(lang)
    left = eta.text(eta.estimate(None, None, progress=progress or {}), lang)
    line = (f"{t('common.images_per_second')}: {number(round(prog['images_per_second']), lang)}"
            f" · {t('common.elapsed')}: {duration(prog['elapsed_s'], lang)}")
    if waited_s and waited_s >= 1:
        line += " · " + t("train.waited", time=duration(waited_s, lang))
    return t("train.progress", step=prog["step"], total=prog["total"]) + " · " + left, line


def result_lines(result: Mapping[str, Any], lang: str) -> str:
    t = i18n.translator(lang)
    return (f"{t('train.train_time')}: {duration(result.get('train_seconds'), lang)} · "
            f"{t('train.ips_col')}: {number(round(result.get('images_per_second') or 0), lang)}"
            f"  \n{t('train.chance')}")


def run_note(run: Any, phase: str, lang: str) -> tuple[str, str, str] | None:
    """(kind, text, icon) the live view says of a run in ``phase``; None while it trains."""
    t = i18n.translator(lang)
    if phase in ("failed", "interrupted"):
        why = run.error_text(lang) or t(f"status.{phase}")   # in the student's language
        return "error", t("train.failed_reason", reason=why), "error"
    if phase == "cancelled":
        result = run.result or {}
        total = int((run.progress or {}).get("total_steps") or 0)
        return ("warning", t("train.cancelled_partial", step=result.get("steps") or 0,
                             total=total) if result else t("train.cancelled_queued"), "stop_circle")
    simple = {"queued": ("info", "train.queue_wait", "schedule"),
              "evaluating": ("info", "train.evaluating", "fact_check"),
              "cancelling": ("info", "train.cancel_requested", "hourglass_top"),
              "starting": ("info", "train.starting", "hourglass_top"),
              "done": ("success", "train.finished", "check_circle")}
    if phase in simple:
        kind, key, icon = simple[phase]
        return kind, t(key), icon
    return None


def loss_chart(view: Any, stamp: Any, lang: str) -> go.Figure | None:
    """The loss figure, rebuilt when ``stamp`` or the language changed; None before any loss."""
    if not view.series.count:
        return None
    return view.memoized("loss", (stamp, lang),
                         lambda old: loss_figure(view.chart(), lang, old))[1]


def split_chart(view: Any, run: Any, stamp: Any, lang: str) -> tuple[Any, str | None]:
    """(``time_split``'s bar, its caption), built like ``loss_chart``; (None, None) at first."""
    t = i18n.translator(lang)

    def build(old):
        split = time_split(view.epochs, run.result if run.finished else None, run.progress)
        return split, split_figure(split, lang, old and old[1]) if split else None

    split, fig = view.memoized("split", (stamp, run.finished, lang), build)
    if split is None:
        return None, None
    return fig[1], (t("train.split_caption", share=percent(split["data_share"], lang)) + "  \n"
                    + t("train.data_bound" if split["data_share"] > 0.5
                        else "train.compute_bound"))


def grad_figure(samples: Sequence[dict], lang: str) -> go.Figure:
    """One line per layer: its gradient norm at each sample (log axis: they span decades)."""
    t = i18n.translator(lang)
    df = pd.DataFrame([(s["step"], r["name"], finite(r.get("grad_norm")))
                       for s in samples for r in s["layers"]], columns=["step", "layer", "grad"])
    fig = px.line(df, x="step", y="grad", log_y=True, **series_style("layer"), labels={
        "step": t("common.step"), "grad": t("train.inside.grad_axis"), "layer": ""})
    fig.update_yaxes(dtick="D2")
    return fig.update_layout(layout(lang, t("train.inside.grad_title"), height=300))


def latest_table(samples: Sequence[dict], lang: str) -> pd.DataFrame:
    """The latest sample: each layer's weight norm, gradient norm and silent ReLUs."""
    t = i18n.translator(lang)
    rows = [{t("train.inside.layer"): r["name"],
             t("train.inside.weight_norm"): i18n.significant(r.get("weight_norm"), lang, 3),
             t("train.inside.grad_norm"): i18n.significant(r.get("grad_norm"), lang, 3),
             t("train.inside.dead_col"): i18n.percent(r.get("dead"), lang, 0)}
            for r in (samples[-1]["layers"] if samples else [])]
    return pd.DataFrame(rows)


def signal_texts(samples: Sequence[dict], lang: str) -> list[str]:
    """The signals of ``core.probes.signals`` as sentences in ``lang``."""
    t = i18n.translator(lang)
    out = []
    for code, p in signals(list(samples)):
        if code == "dead":
            p = p | {"share": i18n.percent(p["share"], lang, 0)}
        elif code == "vanishing":
            p = p | {k: i18n.significant(p[k], lang, 2) for k in ("grad", "weight")}
        out.append(t(f"train.inside.{code}", **p))
    return out
