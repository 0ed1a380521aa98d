"""What the pages' figures share: colours that read in every common colour blindness."""
from __future__ import annotations

import textwrap
from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from cifarlab import i18n

PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000",
           "#F0E442"]
DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]
DIVERGING = "RdBu_r"
SEQUENTIAL = "Viridis"
HIGHLIGHT = "#E69F00"     # Okabe-Ito orange: seen on blue, red, white and Viridis alike
MARGIN = dict(l=10, r=10, t=40, b=10)


def series_style(column: str) -> dict:
    """``px.line`` arguments that give each value of ``column`` its colour and line style."""
    return dict(color=column, line_dash=column, color_discrete_sequence=PALETTE,
                line_dash_sequence=DASHES)


LEGEND_ABOVE = dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0)


def title_over_legend(title: str, top: int) -> dict:
    """Layout: the title at the top of a ``top``-pixel margin, the legend on its own line under
    it (side by side, on a phone a legend of two lines ran over the title)."""
    return dict(margin=dict(l=10, r=10, t=top, b=10),
                title=dict(text=title, x=0.01, xanchor="left", y=0.98, yref="container",
                           yanchor="top"),
                legend=LEGEND_ABOVE)


def localized(fig: go.Figure, lang: str, **layout) -> go.Figure:
    """The figure's numbers with ``lang``'s decimal and group marks, and ``layout``."""
    fig.update_layout(separators=i18n.separators(lang), **layout)
    return fig


def pixel_ticks(n: int) -> dict:
    """Whole-number ticks for a grid of n pixels (plotly's own gives 0.5 steps on small ones)."""
    return dict(tickmode="linear", tick0=0, dtick=1 if n <= 10 else 5 if n <= 40 else 10)


def pixel_axes(fig: go.Figure, rows: int, cols: int | None = None, square: bool = False,
               **kw) -> None:
    """Row 0 at the top, whole-number ticks; ``square``: cells keep their shape."""
    fig.update_xaxes(**pixel_ticks(rows if cols is None else cols),
                     **(dict(constrain="domain") if square else {}), **kw)
    fig.update_yaxes(autorange="reversed", **pixel_ticks(rows),
                     **(dict(scaleanchor="x", constrain="domain") if square else {}), **kw)


def box(fig: go.Figure, top: int, left: int, h: int, w: int, color: str = HIGHLIGHT,
        width: int = 3, dash: str | None = None, **kw) -> None:
    """A rectangle round grid cells (top, left) .. (top + h - 1, left + w - 1)."""
    fig.add_shape(type="rect", x0=left - 0.5, x1=left + w - 0.5, y0=top - 0.5, y1=top + h - 0.5,
                  line=dict(color=color, width=width, dash=dash), **kw)


def colour_limits(values: np.ndarray, signed: bool) -> dict:
    """One colour scale for ``values``: symmetric around zero, or from zero up."""
    lim = float(np.nanmax(np.abs(values))) if np.size(values) else 0.0
    lim = lim or 1.0
    return dict(zmin=-lim, zmax=lim, colorscale=DIVERGING) if signed else \
        dict(zmin=0.0, zmax=lim, colorscale=SEQUENTIAL)


def grid_figure(z, title: str, *, signed: bool = True, text: bool = False,
                height: int = 300) -> go.Figure:
    """A 2-D grid (a kernel, a feature map) as square cells, numbers written in on request."""
    z = np.asarray(z, dtype=float)
    fig = go.Figure(go.Heatmap(z=z, texttemplate="%{z:.2f}" if text else None, showscale=False,
                               **colour_limits(z, signed)))
    fig.update_layout(title=title, height=height, margin=MARGIN)
    pixel_axes(fig, z.shape[0], z.shape[1], square=True)
    return fig


def mosaic(tiles: np.ndarray, titles: Sequence[str], per_row: int = 8,
           fill: float = np.nan, row_titles: Sequence[str] = ()
           ) -> tuple[np.ndarray, list[dict], np.ndarray]:
    """Equal tiles on one axis, ``per_row`` to a row, titles above (a subplot each costs seconds).
    Returns the grid, the titles as annotations, and each cell's (tile from 1, row, column)."""
    n, h, w = tiles.shape[:3]
    rows, cols = -(-n // per_row), min(n, per_row)
    line = max(2, round(0.3 * h))
    band = line * (2 if row_titles else 1)
    z = np.full((rows * (band + h), cols * (w + 1) - 1, *tiles.shape[3:]), fill,
                dtype=float if np.isnan(fill) else tiles.dtype)
    where = np.zeros(z.shape[:2] + (3,), dtype=np.int16)
    notes = []
    for i in range(n):
        r, c = divmod(i, per_row)
        y, x = r * (band + h) + band, c * (w + 1)
        z[y:y + h, x:x + w] = tiles[i]
        where[y:y + h, x:x + w, 0] = i + 1
        where[y:y + h, x:x + w, 1:] = np.moveaxis(np.indices((h, w)), 0, -1)
        notes.append(dict(x=x + (w - 1) / 2, y=y - line / 2 - 0.5, text=titles[i],
                          showarrow=False, font_size=11))
    notes += [dict(x=-0.5, y=r * (band + h) + line / 2 - 0.5, text=title, xanchor="left",
                   showarrow=False, font_size=12) for r, title in enumerate(row_titles)]
    return z, notes, where


def mosaic_layout(fig: go.Figure, grid: np.ndarray, notes: list[dict], title: str = "",
                  width: int = 900) -> None:
    """Square cells, no ticks, the tiles' titles in; the title in lines that fit a phone
    (Plotly never wraps one: a long title is cut at the chart's edge)."""
    hidden = dict(showticklabels=False, ticks="", showgrid=False, zeroline=False,
                  constrain="domain")
    h, w = grid.shape[:2]
    lines = textwrap.wrap(title, 40) or [""]
    fig.update_layout(title="<br>".join(lines), annotations=notes,
                      margin=MARGIN | {"t": 20 + 20 * len(lines)},
                      height=int(30 + 20 * len(lines) + width * h / w),
                      plot_bgcolor="rgba(0,0,0,0)",
                      xaxis=dict(range=[-0.5, w - 0.5], **hidden),
                      yaxis=dict(range=[h - 0.5, -0.5], scaleanchor="x", **hidden))


def arithmetic_figure(window: np.ndarray, kernel: np.ndarray, products: np.ndarray,
                      channel_names: Sequence[str], words: tuple[str, str, str],
                      max_channels: int = 6) -> go.Figure:
    """One output value of a convolution per input channel: window, kernel, products."""
    n = min(len(channel_names), max_channels)
    titles = [f"{word} · {name}" if name else word
              for name in channel_names[:n] for word in words]
    fig = make_subplots(rows=n, cols=3, subplot_titles=titles, horizontal_spacing=0.05,
                        vertical_spacing=0.25 / n)
    k = window.shape[-1]
    for c in range(n):
        for j, z in enumerate((window[c], kernel[c], products[c])):
            fig.add_trace(go.Heatmap(z=z, texttemplate="%{z:.2f}" if k <= 7 else None,
                                     showscale=False, **colour_limits(z, True)),
                          row=c + 1, col=j + 1)
    fig.update_layout(height=230 * n + 40, margin=MARGIN)
    pixel_axes(fig, k)
    fig.update_annotations(font_size=12)
    return fig


def bar_figure(x, y, *, title: str = "", y_title: str = "", text=None, colours=None,
               height: int = 340, **layout) -> go.Figure:
    """Bars with their values written above them."""
    fig = go.Figure(go.Bar(x=list(x), y=list(y), text=text, textposition="outside",
                           marker_color=colours))
    fig.update_layout(title=title, yaxis_title=y_title, height=height,
                      margin=dict(l=10, r=10, t=40 if title else 20, b=10), **layout)
    return fig
