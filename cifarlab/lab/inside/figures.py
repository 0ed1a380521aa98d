"""The Inside the network page's figures and tables, their words from ``t``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from cifarlab import i18n
from cifarlab.core.shapes import fmt_size
from cifarlab.lab import charts as C
from cifarlab.lab.inside import (METHODS, Stage, filter_patches, filter_table, stage,
                                 strongest)

MAX_MAPS = 16           # feature maps drawn of a layer
MAX_CHANNELS = 6        # input channels of one neuron's arithmetic drawn
MAX_FILTERS = 8
MAPS = (("conv1", True), ("pool1", False), ("conv2", True), ("pool2", False))
VECTORS = (("flatten", "values", False), ("relu3", "values", False), ("relu4", "values", False),
           ("fc3", "scores", True), ("softmax", "probabilities", True))


def image_figure(hwc: np.ndarray, title: str, window: tuple[int, int, int] | None = None,
                 height: int = 300, lang: str = i18n.DEFAULT) -> go.Figure:
    """A 32×32 picture as its pixels (HWC uint8); ``window`` (top, left, size) boxed."""
    fig = go.Figure(go.Image(z=np.asarray(hwc)))
    if window is not None:
        C.box(fig, window[0], window[1], window[2], window[2])
    C.pixel_axes(fig, hwc.shape[0])
    return C.localized(fig, lang, title=title, height=height, margin=C.MARGIN)


def maps_figure(values: np.ndarray, titles: Sequence[str], title: str, signed: bool, t,
                per_row: int = 8) -> go.Figure:
    """Feature maps (C×H×W) side by side, all on one colour scale (one layer's maps compare)."""
    n = len(titles)
    grid, notes, where = C.mosaic(np.asarray(values[:n], dtype=float), titles, per_row)
    fig = go.Figure(go.Heatmap(
        z=grid, customdata=where, hoverongaps=False, colorbar=dict(len=0.9, thickness=10),
        hovertemplate=(f"{t('inside.map_n', n='%{customdata[0]}')}"
                       f"<br>{t('inside.col_row')}: %{{customdata[1]}}"
                       f"<br>{t('inside.col_column')}: %{{customdata[2]}}"
                       f"<br>{t('inside.col_value')}: %{{z:.3f}}<extra></extra>"),
        **C.colour_limits(values[:n], signed)))
    C.mosaic_layout(fig, grid, notes, title)
    return fig


def vector_figure(values: np.ndarray, x_title: str, y_title: str,
                  names: Sequence[str] | None = None, highlight: int | None = None) -> go.Figure:
    """A layer's values as bars (index or class name on x)."""
    values = np.asarray(values, dtype=float)
    colours = [C.PALETTE[5] if i == highlight else C.PALETTE[0] for i in range(len(values))]
    fig = go.Figure(go.Bar(x=list(names) if names is not None else list(range(len(values))),
                           y=values, marker_color=colours))
    fig.update_layout(height=260, margin=C.MARGIN, xaxis_title=x_title, yaxis_title=y_title,
                      bargap=0.1 if len(values) > 20 else 0.3)
    if names is None:
        fig.update_xaxes(tickformat="d")
    return fig


@dataclass
class StageView:
    name: str
    heading: str          # "conv1 · `6×28×28`"
    line: str             # the tutorial's code that makes it
    figure: go.Figure
    alt: str
    caption: str | None = None


def stage_views(stages: list[Stage], names: list[str], t, act: str = "ReLU") -> list[StageView]:
    """Each stage: conv and pool layers' first ``MAX_MAPS`` maps, flat layers' values as bars."""
    parts = []       # (stage, figure, alt text, caption)
    for name, signed in MAPS:
        s = stage(stages, name)
        c, n = s.shape[0], min(s.shape[0], MAX_MAPS)
        # tiles numbered only ("map 3" on hover): eight labels a row must fit a phone
        fig = maps_figure(s.values[:n], [str(i + 1) for i in range(n)],
                          t("inside.maps_title" if signed else "inside.maps_title_positive",
                            n=n, c=c), signed, t)
        parts.append((s, fig, t("inside.maps_alt", layer=name, n=n, h=s.shape[1], w=s.shape[2]),
                      t("inside.first_maps", n=n, c=c) if n < c else None))
    for name, key, named in VECTORS:
        s = stage(stages, name)
        fig = vector_figure(s.values, t("inside.x_class") if named else t("inside.x_index"),
                            t(f"inside.y_{key}"), names=names if named else None,
                            highlight=int(np.argmax(s.values)) if named else None)
        parts.append((s, fig, t("inside.vector_alt", layer=name, n=s.shape[0]), None))
    return [StageView(s.name, f"{t(f'inside.stage_{s.name}', act=act)} · `{fmt_size(s.shape)}`",
                      s.line, C.localized(fig, t.lang), alt, caption)
            for s, fig, alt, caption in parts]


def scores_table(stages: list[Stage], names: list[str], t) -> pd.DataFrame:
    """The class scores and probabilities, the numbers of the last two charts."""
    return pd.DataFrame({
        t("a11y.class_col"): names,
        t("inside.y_scores"): [i18n.number(v, t.lang, 3) for v in stage(stages, "fc3").values],
        t("inside.y_probabilities"): [i18n.percent(float(p), t.lang, 1)
                                      for p in stage(stages, "softmax").values]})


def pick_figure(fmap: np.ndarray, row: int, col: int, title: str, t) -> go.Figure:
    """A feature map to click on: an all but invisible marker on every cell (plotly selects
    markers, not heatmap cells); the chosen cell boxed."""
    h, w = fmap.shape
    hover = (f"{t('inside.col_row')}: %{{y}}<br>{t('inside.col_column')}: %{{x}}"
             f"<br>{t('inside.col_value')}: %{{customdata:.4f}}<extra></extra>")
    fig = go.Figure(go.Heatmap(z=fmap, hoverinfo="skip", **C.colour_limits(fmap, True),
                               colorbar=dict(thickness=10)))
    rr, cc = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    fig.add_trace(go.Scatter(
        x=cc.ravel(), y=rr.ravel(), mode="markers", showlegend=False,
        marker=dict(symbol="square", size=max(6, int(300 / max(h, w))),
                    color="rgba(0,0,0,0.01)"),
        customdata=np.round(fmap.ravel(), 4), hovertemplate=hover))
    C.box(fig, row, col, 1, 1)
    C.pixel_axes(fig, h, w, square=True)
    return C.localized(fig, t.lang, title=title, height=420, margin=C.MARGIN,
                       clickmode="event+select", dragmode=False)


def neuron_view(n: dict, t) -> tuple[go.Figure, pd.DataFrame]:
    """One neuron's arithmetic, per input channel (the first ``MAX_CHANNELS``), and its table."""
    c = n["window"].shape[0]
    names = ([t("network.channel_name", c=ch) for ch in "RGB"] if n["layer"] == "conv1"
             else [t("inside.map_n", n=i + 1) for i in range(c)])
    words = (t("network.window"), t("network.kernel_word"), t("network.products"))
    fig = C.arithmetic_figure(n["window"], n["kernel"], n["products"], names, words, MAX_CHANNELS)
    shown = slice(0, MAX_CHANNELS)
    idx = np.indices(n["window"][shown].shape).reshape(3, -1)
    table = pd.DataFrame({
        t("inside.col_channel"): [names[i] for i in idx[0]],
        t("inside.col_row"): idx[1], t("inside.col_column"): idx[2],
        **{word: [i18n.number(v, t.lang, 4) for v in values[shown].ravel()]
           for word, values in zip(words, (n["window"], n["kernel"], n["products"]))}})
    return C.localized(fig, t.lang), table


def filters_view(after, before, t) -> tuple[go.Figure, pd.DataFrame]:
    """conv1's kernels as colour patches, trained and (when known) initial, and a table."""
    rows = ([(t("inside.random_weights"), filter_patches(after))] if before is None else
            [(t("inside.before"), filter_patches(before)),
             (t("inside.after"), filter_patches(after))])
    n = min(after.shape[0], MAX_FILTERS)
    grid, notes, _ = C.mosaic(np.concatenate([patches[:n] for _, patches in rows]),
                              [t("inside.map_n", n=i + 1) for _ in rows for i in range(n)],
                              per_row=n, fill=255, row_titles=[label for label, _ in rows])
    fig = go.Figure(go.Image(z=grid))
    C.mosaic_layout(fig, grid, notes)
    cols = {"kernel": "col_filter", "red": "col_red", "green": "col_green", "blue": "col_blue",
            "norm": "col_norm", "norm_before": "col_norm_before", "moved": "col_moved"}
    table = pd.DataFrame([{t(f"inside.{cols[k]}"): v if k == "kernel" else i18n.number(v, t.lang, 3)
                           for k, v in row.items()} for row in filter_table(before, after)])
    return C.localized(fig, t.lang), table


def why_view(hwc: np.ndarray, views: dict, targets: list[tuple[int, str]], names: list[str],
             t) -> tuple[go.Figure, pd.DataFrame]:
    """Each method's map over the picture, a row per class; their strongest squares as a table."""
    cells = [[(f"{label}<br>{t(f'inside.method_{m}')}", views[cls][m].heat, views[cls][m].signed)
              for m in METHODS] for cls, label in targets]
    fig = make_subplots(rows=len(cells), cols=len(METHODS), horizontal_spacing=0.03,
                        vertical_spacing=0.1,
                        subplot_titles=[title for row in cells for title, _, _ in row])
    for r, row in enumerate(cells):
        for c, (_, heat, signed) in enumerate(row):
            fig.add_trace(go.Image(z=np.asarray(hwc)), row=r + 1, col=c + 1)
            fig.add_trace(go.Heatmap(z=heat, opacity=0.6, showscale=False,
                                     hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>",
                                     **C.colour_limits(heat, signed)), row=r + 1, col=c + 1)
    fig.update_layout(height=300 * len(cells) + 40, margin=C.MARGIN)
    C.pixel_axes(fig, hwc.shape[0])
    fig.update_annotations(font_size=12)
    table = pd.DataFrame([{
        t("inside.col_class"): names[cls], t("inside.col_method"): t(f"inside.method_{m}"),
        t("inside.col_strongest"): "; ".join(
            t("inside.square", top=r0, left=c0, bottom=r0 + 3, right=c0 + 3)
            for r0, c0, _ in strongest(views[cls][m].heat, 4, 3))}
        for cls, _ in targets for m in METHODS])
    return C.localized(fig, t.lang), table


def summary(stages: list[Stage], image: str, true_cls: int | None, names: list[str], t) -> str:
    """What the network answers for the picture (and its true class, when known)."""
    probs = stage(stages, "softmax").values
    best = int(np.argmax(probs))
    text = t("inside.summary", image=image, predicted=names[best],
             p=i18n.percent(float(probs[best]), t.lang, 0))
    return text if true_cls is None else text + " " + t("inside.summary_true", name=names[true_cls])


def wrong_options(probs: np.ndarray, labels: np.ndarray, wrong: np.ndarray, names: list[str],
                  t) -> dict[int, str]:
    """Misclassified test images for a picker: index -> "#12: cat, answered dog (91 %)"."""
    return {int(i): t("inside.wrong_option", i=str(i), true=names[int(labels[i])],
                      predicted=names[int(probs[i].argmax())],
                      p=i18n.percent(float(probs[i].max()), t.lang, 0)) for i in wrong}


def why_targets(probs: np.ndarray, true_cls: int | None, names: list[str],
                t) -> list[tuple[int, str]]:
    """(class, row label) of the predicted class, then of the true one when the network missed
    it, else of the runner-up."""
    first, second = (int(i) for i in np.argsort(-probs, kind="stable")[:2])
    rows = [("inside.predicted_row", first),
            ("inside.true_row", int(true_cls)) if true_cls is not None and true_cls != first
            else ("inside.other_row", second)]
    return [(cls, t(key, name=names[cls], p=i18n.percent(float(probs[cls]), t.lang, 0)))
            for key, cls in rows]
