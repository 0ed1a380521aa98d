"""The class experiment's picture: every run's loss curve, a colour and dash per value, and each
finished run's accuracy against the value with each value's mean; also the runs as CSV.
``view`` is serve's ``ExperimentView``, read by attribute only."""
from __future__ import annotations

import io
import math
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from cifarlab import i18n
from cifarlab.core.safe_text import csv_writer
from cifarlab.lab import charts as C
from cifarlab.lab.classroom import knob_label, shown

LABELS_UP_TO = 16      # nicknames written beside the points while there are at most this many
CSV_COLUMNS = ("knob", "value", "nickname", "run", "status", "accuracy", "final_loss", "steps")


def _numeric(values: Any) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def log_axis(values: Any) -> bool:
    """A log axis for positive numbers spanning a hundredfold or more (0.0001 … 1)."""
    return _numeric(values) and min(values) > 0 and max(values) >= 100 * min(values)


def figure(view: Any, lang: str, height: int = 640, font: int | None = None) -> go.Figure:
    """The class's picture, the viewer's own runs thick; ``font``: a projector's type size."""
    t, ex = i18n.translator(lang), view.experiment
    label = knob_label(ex.knob, lang)
    order = list(ex.values) + [v for v in dict.fromkeys(r.value for r in view.rows)
                               if v not in ex.values]
    texts = {v: shown(v, lang, ex.knob) for v in order}
    numeric = _numeric(order)
    style = {v: (C.PALETTE[i % len(C.PALETTE)], C.DASHES[i % len(C.DASHES)])
             for i, v in enumerate(order)}

    def who(r: Any) -> str:
        return t("classroom.experiment.you", nickname=r.nickname) if r.you else r.nickname

    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.23 if font else 0.17, subplot_titles=(
        t("classroom.experiment.loss_title"), t("classroom.experiment.accuracy_title")))
    legend = set()
    for r in sorted(view.rows, key=lambda r: r.you):      # the viewer's own run on top
        if not r.steps:
            continue
        color, dash = style[r.value]
        name = texts[r.value]
        fig.add_trace(go.Scatter(
            x=list(r.steps), y=list(r.losses), mode="lines", name=name, legendgroup=name,
            legendrank=order.index(r.value), showlegend=name not in legend,
            line=dict(color=color, dash=dash, width=5 if r.you else 1.5),
            opacity=1 if r.you else 0.75, customdata=[[who(r), f"{label} = {name}"]] * len(r.steps),
            hovertemplate="%{customdata[0]}<br>%{customdata[1]}<br>%{x}: %{y:.3f}"
            "<extra></extra>"), row=1, col=1)
        legend.add(name)
    done, means = [r for r in view.rows if r.accuracy is not None], []
    for column, v in enumerate(order):
        runs = [r for r in done if r.value == v]
        if not runs:
            continue
        x, names = (v if numeric else texts[v]), [who(r) for r in runs]
        # nicknames on alternate sides (close points stay legible), inward at either end
        sides = ["middle left" if column and (column == len(order) - 1 or i % 2) else
                 "middle right" for i in range(len(runs))]
        fig.add_trace(go.Scatter(
            x=[x] * len(runs), y=[100 * r.accuracy for r in runs], showlegend=False,
            mode="markers+text" if len(done) <= LABELS_UP_TO else "markers",
            text=names, hovertext=names, textposition=sides,
            hovertemplate="%{hovertext}: %{y:.1f} %<extra></extra>",
            marker=dict(color=style[v][0], size=[18 if r.you else 10 for r in runs],
                        symbol=["star" if r.you else "circle" for r in runs],
                        line=dict(width=[2 if r.you else 0 for r in runs], color="#000000"))),
            row=2, col=1)
        means.append((x, 100 * sum(r.accuracy for r in runs) / len(runs)))
    if len(means) > 1:
        fig.add_trace(go.Scatter(x=[m[0] for m in means], y=[m[1] for m in means],
                                 mode="lines", name=t("classroom.experiment.mean"),
                                 legendrank=len(order), hoverinfo="skip",
                                 line=dict(color="#000000", dash="dot", width=2)), row=2, col=1)
    fig.update_xaxes(title_text=t("common.step"), row=1, col=1)
    fig.update_yaxes(title_text=t("common.loss"), row=1, col=1)
    fig.update_yaxes(title_text=t("classroom.experiment.accuracy_axis"), row=2, col=1)
    if numeric:   # ticks at the values compared, written as the preset form writes them
        axis = dict(type="log" if log_axis(order) else "linear", tickvals=order,
                    ticktext=list(texts.values()))
    else:
        axis = dict(type="category", categoryorder="array", categoryarray=list(texts.values()))
    fig.update_xaxes(title_text=label, **axis, row=2, col=1)
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", y=-0.12, yanchor="top", x=0,
                                  title=dict(text=label, side="top")))
    if font:
        fig.update_layout(font=dict(size=font))
        fig.update_annotations(font_size=font)
    return C.localized(fig, lang)


def as_csv(view: Any) -> str:
    """The experiment's runs as CSV: nicknames and run numbers, no person or run ids."""
    out = io.StringIO()
    w = csv_writer(out, lineterminator="\n")   # a nickname such as =HYPERLINK(...) stays text
    w.writerow(CSV_COLUMNS)
    rank = {v: i for i, v in enumerate(view.experiment.values)}
    for r in sorted(view.rows, key=lambda r: (rank.get(r.value, len(rank)), r.nickname,
                                              r.run_number)):
        last = r.losses[-1] if r.losses else None
        w.writerow([view.experiment.knob, r.value, r.nickname, r.run_number, r.status,
                    "" if r.accuracy is None else f"{r.accuracy:.6f}",
                    "" if last is None or not math.isfinite(last) else f"{last:.6g}",
                    r.steps[-1] if r.steps else ""])
    return out.getvalue()
