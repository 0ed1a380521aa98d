"""The Results page's figures and words, in the language of ``t`` (``i18n.translator(lang)``)."""
from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from cifarlab import i18n
from cifarlab.lab import charts as C
from cifarlab.lab.results import TUTORIAL_REFERENCE
from cifarlab.lab.tables import class_name

BAR = C.PALETTE[0]
REFERENCE = C.PALETTE[5]
TIGHT = dict(C.MARGIN, t=20)


def pct(x: float, lang: str, digits: int = 1) -> str:
    """A fraction as a percentage's number ("55,3" in Spanish; the page adds " %")."""
    return i18n.number(100 * x, lang, digits)


def run_label(run, session: str, t) -> str:
    """A run in a picker: name, id, start, accuracy; its status unless done; a classmate's."""
    when = datetime.fromtimestamp(run.started_at or run.created_at).strftime("%d/%m %H:%M")
    acc = (run.result or {}).get("test_accuracy")
    text = t("results.run_option", id=run.id[:8], when=when,
             acc=pct(acc, t.lang) if isinstance(acc, (int, float)) else "–")
    if run.name:
        text = f"{run.name} · {text}"
    if run.status != "done":
        text += f" · {t(f'status.{run.status}')}"
    if run.session != session:
        text += " · " + t("results.classmate_run")
    return text


def accuracy_figure(per_class: Mapping[str, float], t) -> go.Figure:
    """Accuracy per class (class -> 0..1), the tutorial's ranges and overall figure as a line."""
    ref, lang = TUTORIAL_REFERENCE, t.lang
    fig = go.Figure(go.Bar(
        x=[class_name(c, lang) for c in per_class], y=[100 * a for a in per_class.values()],
        name=t("results.this_model"), marker_color=BAR, textposition="outside",
        cliponaxis=False, text=[pct(a, lang, 0) for a in per_class.values()]))
    ranges = {c: r for c, r in ref["per_class_ranges"].items() if c in per_class}
    if ranges:
        lo, hi = np.array(list(ranges.values())).T
        fig.add_trace(go.Scatter(
            x=[class_name(c, lang) for c in ranges], y=100 * (lo + hi) / 2, mode="markers",
            name=t("results.tutorial_range"),
            marker=dict(color=REFERENCE, size=9, symbol="line-ew-open"),
            error_y=dict(type="data", array=100 * (hi - lo) / 2, color=REFERENCE, thickness=3,
                         width=10)))
    # the line across the chart; its words in the legend, below the chart, never on the bars
    line = dict(dash="dash", color="#9aa5b1")
    fig.add_hline(y=100 * ref["accuracy"], line=line)
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=line, hoverinfo="skip",
                             name=t("results.tutorial_figure", pct=pct(ref["accuracy"], lang, 0))))
    # the legend above the bars: below them, a phone's slanted class names ran under it
    return C.localized(fig, lang, height=400, margin=dict(TIGHT, t=80),
                       yaxis_title=t("common.accuracy") + " (%)", yaxis_range=[0, 105],
                       legend=C.LEGEND_ABOVE)


def confusion_figure(ev, mistakes_only: bool, t) -> go.Figure:
    """The confusion matrix, counts written in (the diagonal hidden for ``mistakes_only``),
    with an almost invisible marker on every cell: heatmaps cannot be selected, markers can."""
    k, names = len(ev.classes), [class_name(c, t.lang) for c in ev.classes]
    m = np.array(ev.confusion, dtype=float)
    z = m.copy()
    if mistakes_only:
        np.fill_diagonal(z, np.nan)
    ii, jj = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
    fig = go.Figure(go.Heatmap(z=z, x=names, y=names, colorscale="Blues", text=m.astype(int),
                               texttemplate="%{text:,}", hoverinfo="skip", showscale=False))
    fig.add_trace(go.Scatter(
        x=[names[j] for j in jj.ravel()], y=[names[i] for i in ii.ravel()], mode="markers",
        marker=dict(symbol="square", size=34, color="rgba(0,0,0,0.01)"),
        customdata=np.stack([ii.ravel(), jj.ravel(), m.ravel()], axis=1), showlegend=False,
        hovertemplate=(t("results.true_label") + ": %{y}<br>" + t("results.predicted_label")
                       + ": %{x}<br>" + t("results.count")
                       + ": %{customdata[2]:,}<extra></extra>")))
    fig.update_yaxes(autorange="reversed")
    return C.localized(fig, t.lang, height=560, margin=dict(C.MARGIN, t=10),
                       clickmode="event+select", xaxis_title=t("results.predicted_label"),
                       yaxis_title=t("results.true_label"))


def epochs_figure(long: pd.DataFrame, t) -> go.Figure:
    """Per-class accuracy after each epoch (``per_class_by_epoch``'s frame), a line a class."""
    df = long.assign(accuracy=100 * long["accuracy"],
                     cls=[class_name(c, t.lang) for c in long["class"]])
    fig = px.line(df, x="epoch", y="accuracy", color="cls", markers=True,
                  labels={"epoch": t("common.epoch"), "accuracy": t("common.accuracy") + " (%)",
                          "cls": t("common.class")})
    fig.update_xaxes(dtick=1)
    return C.localized(fig, t.lang, height=360, margin=TIGHT, yaxis_range=[0, 100])


def guesses_figure(ranked: list[tuple[str, float]], t) -> go.Figure:
    """The model's five likeliest classes for a picture, the likeliest on top."""
    top = ranked[:5][::-1]
    fig = go.Figure(go.Bar(x=[100 * q for _, q in top], y=[class_name(c, t.lang) for c, _ in top],
                           orientation="h", text=[f"{pct(q, t.lang)} %" for _, q in top],
                           textposition="outside", marker_color=BAR))
    return C.localized(fig, t.lang, height=240, margin=dict(C.MARGIN, r=30, t=30),
                       title=t("results.top_guesses"), xaxis_range=[0, 110],
                       xaxis_title=t("results.probability"))
