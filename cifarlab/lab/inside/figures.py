"""The Inside the network page's plotly figures. Every text on them comes in as an argument,
already in the student's language; pixel grids get whole-number ticks; colours are
colour-blind safe (RdBu around zero, Viridis from zero up: both read in every common colour
blindness and in grey). Never imports streamlit.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

DIVERGING = "RdBu_r"      # negative blue, zero white, positive red
SEQUENTIAL = "Viridis"
HIGHLIGHT = "#E69F00"     # Okabe-Ito orange: seen on blue, red, white and Viridis alike
MARGIN = dict(l=10, r=10, t=40, b=10)


def _pixel_axes(fig: go.Figure, size: int, **kw) -> None:
    step = max(1, int(math.ceil(size / 8)))
    fig.update_xaxes(tickmode="linear", tick0=0, dtick=step, tickformat="d", **kw)
    fig.update_yaxes(tickmode="linear", tick0=0, dtick=step, tickformat="d",
                     autorange="reversed", **kw)


def _box(fig: go.Figure, top: int, left: int, h: int, w: int, **kw) -> None:
    fig.add_shape(type="rect", x0=left - 0.5, x1=left + w - 0.5, y0=top - 0.5, y1=top + h - 0.5,
                  line=dict(color=HIGHLIGHT, width=3), **kw)


def _limits(values: np.ndarray, signed: bool) -> dict:
    lim = float(np.nanmax(np.abs(values))) if values.size else 0.0
    lim = lim or 1.0
    return dict(zmin=-lim, zmax=lim, colorscale=DIVERGING) if signed else \
        dict(zmin=0.0, zmax=lim, colorscale=SEQUENTIAL)


def image_figure(hwc: np.ndarray, title: str, window: tuple[int, int, int] | None = None,
                 height: int = 300) -> go.Figure:
    """A 32×32 picture as its pixels (HWC uint8); ``window`` (top, left, size) boxed."""
    fig = go.Figure(go.Image(z=np.asarray(hwc)))
    if window is not None:
        _box(fig, window[0], window[1], window[2], window[2])
    fig.update_layout(title=title, height=height, margin=MARGIN)
    _pixel_axes(fig, hwc.shape[0])
    return fig


def maps_figure(values: np.ndarray, titles: Sequence[str], title: str, signed: bool,
                per_row: int = 8, height_per_row: int | None = None) -> go.Figure:
    """Feature maps (C×H×W) side by side, all on one colour scale (one layer's maps compare)."""
    n = len(titles)
    rows = int(math.ceil(n / per_row))
    cols = min(n, per_row)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=list(titles),
                        horizontal_spacing=0.02, vertical_spacing=0.12 / max(1, rows - 1) + 0.04)
    scale = _limits(values[:n], signed)
    for i in range(n):
        fig.add_trace(go.Heatmap(z=values[i], showscale=i == 0, **scale,
                                 colorbar=dict(len=0.9, thickness=10)),
                      row=i // per_row + 1, col=i % per_row + 1)
    per_map = height_per_row or int(900 / cols) + 10   # square maps on a ~900 px wide column
    fig.update_layout(title=title, height=60 + per_map * rows, margin=MARGIN)
    _pixel_axes(fig, values.shape[-1], showticklabels=False)
    for i in range(n):   # square cells: each map's y axis keeps its x axis's scale
        fig.update_yaxes(scaleanchor=f"x{i + 1 if i else ''}", constrain="domain",
                         row=i // per_row + 1, col=i % per_row + 1)
        fig.update_xaxes(constrain="domain", row=i // per_row + 1, col=i % per_row + 1)
    fig.update_annotations(font_size=11)
    return fig


def vector_figure(values: np.ndarray, title: str, x_title: str, y_title: str,
                  names: Sequence[str] | None = None, highlight: int | None = None,
                  height: int = 260) -> go.Figure:
    """A layer's values as bars (index or class name on x)."""
    values = np.asarray(values, dtype=float)
    x = list(names) if names is not None else list(range(len(values)))
    colours = ["#0072B2"] * len(values)
    if highlight is not None and 0 <= highlight < len(values):
        colours[highlight] = "#D55E00"
    fig = go.Figure(go.Bar(x=x, y=values, marker_color=colours))
    fig.update_layout(title=title, height=height, margin=MARGIN, xaxis_title=x_title,
                      yaxis_title=y_title, bargap=0.1 if len(values) > 20 else 0.3)
    if names is None:
        fig.update_xaxes(tickformat="d")
    return fig


def pick_figure(fmap: np.ndarray, row: int, col: int, title: str, hover: str,
                height: int = 420) -> go.Figure:
    """One feature map to click on: a heatmap, and an all but invisible marker on every cell
    (plotly selects markers, not heatmap cells); the chosen cell boxed."""
    h, w = fmap.shape
    fig = go.Figure(go.Heatmap(z=fmap, hoverinfo="skip", **_limits(fmap, True),
                               colorbar=dict(thickness=10)))
    rr, cc = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    fig.add_trace(go.Scatter(
        x=cc.ravel(), y=rr.ravel(), mode="markers", showlegend=False,
        marker=dict(symbol="square", size=max(6, int(300 / max(h, w))),
                    color="rgba(0,0,0,0.01)"),
        customdata=np.round(fmap.ravel(), 4), hovertemplate=hover + "<extra></extra>"))
    _box(fig, row, col, 1, 1)
    fig.update_layout(title=title, height=height, margin=MARGIN, clickmode="event+select",
                      dragmode=False)
    _pixel_axes(fig, max(h, w))
    fig.update_yaxes(scaleanchor="x", constrain="domain")
    fig.update_xaxes(constrain="domain")
    return fig


def arithmetic_figure(window: np.ndarray, kernel: np.ndarray, products: np.ndarray,
                      channel_names: Sequence[str], words: tuple[str, str, str],
                      max_channels: int = 6) -> go.Figure:
    """Per input channel: the window, the kernel, their products, numbers written in."""
    n = min(len(channel_names), max_channels)
    titles = [f"{word} · {name}" for name in channel_names[:n] for word in words]
    fig = make_subplots(rows=n, cols=3, subplot_titles=titles, horizontal_spacing=0.05,
                        vertical_spacing=0.25 / n)
    k = window.shape[-1]
    for c in range(n):
        for j, z in enumerate((window[c], kernel[c], products[c])):
            fig.add_trace(go.Heatmap(z=z, texttemplate="%{z:.2f}" if k <= 7 else None,
                                     showscale=False, **_limits(z, True)), row=c + 1, col=j + 1)
    fig.update_layout(height=230 * n + 40, margin=MARGIN)
    _pixel_axes(fig, k)
    fig.update_annotations(font_size=12)
    return fig


def filters_figure(rows: Sequence[tuple[str, np.ndarray]], kernel_titles: Sequence[str],
                   per_row: int = 8) -> go.Figure:
    """conv1's kernels as colour patches (``filter_patches``), one line of them per model."""
    n = min(len(kernel_titles), per_row)
    titles = [f"{label} · {k}" for label, _ in rows for k in kernel_titles[:n]]
    fig = make_subplots(rows=len(rows), cols=n, subplot_titles=titles, horizontal_spacing=0.02,
                        vertical_spacing=0.15)
    for r, (_, patches) in enumerate(rows):
        for i in range(n):
            fig.add_trace(go.Image(z=patches[i]), row=r + 1, col=i + 1)
    fig.update_layout(height=190 * len(rows) + 40, margin=MARGIN)
    _pixel_axes(fig, patches.shape[1] if len(rows) else 5)
    fig.update_annotations(font_size=11)
    return fig


def overlay_figure(hwc: np.ndarray, cells: Sequence[Sequence[tuple[str, np.ndarray, bool]]],
                   opacity: float = 0.6) -> go.Figure:
    """Rows of (title, map, signed): each map drawn over the picture, on its own scale."""
    rows, cols = len(cells), max(len(r) for r in cells)
    fig = make_subplots(rows=rows, cols=cols, horizontal_spacing=0.03, vertical_spacing=0.1,
                        subplot_titles=[title for row in cells for title, _, _ in row])
    for r, row in enumerate(cells):
        for c, (_, heat, signed) in enumerate(row):
            fig.add_trace(go.Image(z=np.asarray(hwc)), row=r + 1, col=c + 1)
            fig.add_trace(go.Heatmap(z=heat, opacity=opacity, showscale=False,
                                     hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>",
                                     **_limits(heat, signed)), row=r + 1, col=c + 1)
    fig.update_layout(height=300 * rows + 40, margin=MARGIN)
    _pixel_axes(fig, hwc.shape[0])
    fig.update_annotations(font_size=12)
    return fig
