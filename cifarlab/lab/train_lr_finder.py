"""The Train page's learning-rate finder (``core.lr_finder`` runs it): its boxes, curve, words."""
from __future__ import annotations

import math
from typing import Any, Mapping

import pandas as pd
import plotly.graph_objects as go

from cifarlab import i18n
from cifarlab.core import lr_finder
from cifarlab.core.probes import finite
from cifarlab.errors import Problem
from cifarlab.lab.charts import HIGHLIGHT, PALETTE
from cifarlab.lab.train_live import layout


def read(steps: Any, lr_from: Any, lr_to: Any) -> tuple[dict | None, dict[str, Problem]]:
    """The sweep the boxes ask for (``JobQueue.submit``'s ``sweep``) and each field's problem."""
    lo, hi = i18n.parse_decimal(lr_from), i18n.parse_decimal(lr_to)
    found = {p.field: p for p in lr_finder.problems(steps, lo, hi)}
    return (None if found else {"steps": int(steps), "lr_min": lo, "lr_max": hi}), found


def suggested(result: Mapping[str, Any] | None) -> float | None:
    """The suggestion as the form takes it: two significant figures (0.0123 -> 0.012)."""
    lr = finite((result or {}).get("suggestion"))
    return float(f"{lr:.2g}") if lr and lr > 0 else None


def figure(result: Mapping[str, Any], lang: str) -> go.Figure:
    """Loss against lr (log axis): raw and smoothed, the suggestion a star, the minimum a ring."""
    t = i18n.translator(lang)
    lrs, smooth = list(result.get("lrs") or []), list(result.get("smoothed") or [])
    raw = [finite(v) for v in result.get("losses") or []]
    fig = go.Figure(layout=layout(lang, t("train.lr_find.chart_title"), height=420))
    fig.add_scatter(x=lrs, y=raw, mode="markers", name=t("train.lr_find.raw"),
                    marker=dict(color=PALETTE[4], size=4, opacity=0.5))
    fig.add_scatter(x=lrs[:len(smooth)], y=smooth, mode="lines", name=t("train.lr_find.smooth"),
                    line=dict(color=PALETTE[0], width=3))
    marks = [("lr_at_min", "train.lr_find.minimum", "circle-open", PALETTE[5]),
             ("suggestion", "train.lr_find.suggested", "star", HIGHLIGHT)]
    for key, label, symbol, colour in marks:
        lr = finite(result.get(key))
        if lr is None or not smooth:
            continue
        k = min(range(len(smooth)), key=lambda i: abs(math.log(lrs[i] / lr)))
        fig.add_scatter(x=[lr], y=[smooth[k]], mode="markers", name=t(
            label, lr=i18n.significant(lr, lang, 2)), marker=dict(
                symbol=symbol, size=16, color=colour, line=dict(width=2, color=colour)))
    if smooth:   # from a little under the lowest loss to a little over the start: the
        low = min(smooth)   # fall fills the chart, the explosion leaves it at the top
        fig.update_yaxes(range=[low * 0.95, max(smooth[0], low) * 1.3])
    fig.update_xaxes(type="log", dtick=1, exponentformat="power", title_text=t("common.lr"))
    fig.update_yaxes(title_text=t("common.loss"))
    # the legend under the chart: above it, on a phone, it ran over the title
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.25, xanchor="left", x=0),
                      margin_t=56)
    return fig


def summary(result: Mapping[str, Any], lang: str) -> list[str]:
    """What the sweep found: how it ended, the suggestion and by which rule."""
    t, r = i18n.translator(lang), result
    sig = lambda v: i18n.significant(v, lang, 2)  # noqa: E731 - a one-line formatter
    stop = r.get("stop") or "none"   # exploded, nan (at the last lr), cancelled or none
    at = r["lr_max"] if stop == "none" else (r.get("lrs") or [0])[-1]
    lines = [t(f"train.lr_find.stop_{stop}", n=r.get("steps", 0), lr=sig(at))]
    lr = suggested(r)
    if lr is None:
        lines.append(t("train.lr_find.no_suggestion"))
    else:
        lines.append(t(f"train.lr_find.rule_{r.get('rule')}", lr=sig(lr),
                       low=sig(r.get("lr_at_min") or 0)))
    return lines


def table(result: Mapping[str, Any], lang: str) -> pd.DataFrame:
    """The chart's numbers, a row a step: the lr, the step's loss, the smoothed loss."""
    t, sig = i18n.translator(lang), lambda v: i18n.significant(v, lang, 3)
    smooth = list(result.get("smoothed") or [])
    return pd.DataFrame([{t("train.lr_find.step_col"): i + 1, t("common.lr"): sig(lr),
                          t("train.lr_find.raw"): sig(finite(loss)),
                          t("train.lr_find.smooth"): sig(smooth[i]) if i < len(smooth) else "–"}
                         for i, (lr, loss) in enumerate(zip(result.get("lrs") or [],
                                                            result.get("losses") or []))])
