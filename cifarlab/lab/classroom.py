"""The classroom pages' tables, words and charts; serve's records are read by attribute only."""
from __future__ import annotations

import functools
import io
import math
import time
from typing import Any, Iterable
from urllib.parse import urlencode, urlsplit

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from cifarlab import i18n
from cifarlab.core.config import knobs
from cifarlab.core.safe_text import csv_writer
from cifarlab.lab import charts as C
from cifarlab.lab.train_form import widget_value

KNOBS = {f.name: f for f in knobs()}
CODE_PARAM = "class"   # the join link's query parameter (Home fills the code in from it)
LEADER_CSV = ("board", "goal", "rank", "nickname", "run", "score", "accuracy", "train_seconds",
              "finished_at")


def clock(ts: float | None) -> str:
    """A moment as the room's wall clock shows it ("14:05:09"); "–" when there is none."""
    return "–" if ts is None else time.strftime("%H:%M:%S", time.localtime(ts))


def status_text(status: str, lang: str) -> str:
    """A run's status as one word (the board has its own column for the place in the queue)."""
    return i18n.t("status.in_queue" if status == "queued" else f"status.{status}", lang)


def board_table(rows: Iterable[Any], lang: str) -> pd.DataFrame:
    """The live board, a row a run (its loss a list, for a sparkline column)."""
    return pd.DataFrame([{
        "nickname": r.nickname, "status": status_text(r.status, lang),
        "queue": r.queue_position, "loss": list(r.losses), "progress": r.progress,
        "accuracy": None if r.accuracy is None else 100 * r.accuracy,
        "device": r.device, "started": clock(r.created_at)} for r in rows])


def leader_table(rows: Iterable[Any], kind: str, lang: str) -> pd.DataFrame:
    """A leaderboard: place (equal scores share one), nickname, score on the board's half
    (accuracy, or seconds for "fastest_to"), accuracy on the whole test set, finish time."""
    t = i18n.translator(lang)
    score = t("classroom.challenge.score_seconds" if kind == "fastest_to"
              else "classroom.challenge.score_accuracy")
    columns = [t("classroom.challenge.rank"), t("classroom.board.nickname"), score,
               t("classroom.challenge.accuracy"), t("classroom.challenge.finished")]
    return pd.DataFrame([(
        i18n.number(r.rank, lang), r.nickname,
        (i18n.number(round(r.score, 1), lang) if kind == "fastest_to"
         else i18n.percent(r.score, lang, 1)),
        i18n.percent(r.accuracy, lang, 1), clock(r.finished_at)) for r in rows], columns=columns)


def leader_csv(rows: Iterable[Any], which: str, kind: str) -> str:
    """A leaderboard as CSV (accuracy 0..1, seconds as numbers): no person or run ids."""
    return _csv(LEADER_CSV, ([which, kind, r.rank, r.nickname, r.run_number or "",
                              f"{r.score:.6g}", f"{r.accuracy:.6f}",
                              "" if r.seconds is None else f"{r.seconds:.3f}",
                              f"{r.finished_at:.3f}"] for r in rows))


def _csv(header: Iterable[str], rows: Iterable[list]) -> str:
    out = io.StringIO()
    w = csv_writer(out, lineterminator="\n")   # a nickname such as =HYPERLINK(...) stays text
    for row in (header, *rows):
        w.writerow(row)
    return out.getvalue()


def goal_text(goal: Any, lang: str) -> str:
    t = i18n.translator(lang)
    if goal.kind == "fastest_to":
        return t("classroom.challenge.goal_fastest_to",
                 target=i18n.percent(goal.target or 0, lang, 0))
    device = goal.device or t("classroom.challenge.device_any")
    if goal.max_epochs is None:
        return t("classroom.challenge.goal_best_accuracy_any", device=device)
    return t("classroom.challenge.goal_best_accuracy", epochs=goal.max_epochs, device=device)


def join_link(page_url: str | None, code: str) -> str:
    """This server's Home with ``?class=CODE`` (relative when the page's URL is not known); no
    language: each student's browser picks their own."""
    query = urlencode({CODE_PARAM: code})
    parts = urlsplit(page_url or "")
    return f"{parts.scheme}://{parts.netloc}/?{query}" if parts.netloc else f"/?{query}"


@functools.lru_cache(maxsize=32)   # one per class link, drawn on every rerun
def qr_png(text: str) -> bytes:
    import segno

    out = io.BytesIO()
    segno.make(text, error="m").save(out, kind="png", scale=6, border=2)
    return out.getvalue()


def knob_label(name: str, lang: str) -> str:
    return i18n.t(KNOBS[name].knob.label, lang) if name in KNOBS else name


def values_text(experiment: Any, lang: str) -> str:
    """An experiment's values as its form takes them back ("0,0001; 0,01" in Spanish): the
    console opens with the running experiment in its form, to change one value."""
    kind = KNOBS[experiment.knob].knob.kind
    return "; ".join(str(widget_value(kind, v, lang)) for v in experiment.values)


def shown(value: Any, lang: str, name: str = "") -> str:
    """A value of knob ``name`` in words, as the Train page gives it."""
    t, f = i18n.translator(lang), KNOBS.get(name)
    kind = f and f.knob.kind
    if value is None:
        return t("classroom.preset.all_images") if name == "train_subset" else "–"
    if name == "seed":   # a name for a run's randomness, not a quantity: no separators
        return str(value)
    if isinstance(value, bool):
        return t("common.yes" if value else "common.no")
    if kind == "device" and value == "auto":
        return t("common.device_auto")
    if kind == "choice" and f"common.{name}_{value}" in i18n.catalog(lang):
        return t(f"common.{name}_{value}")
    if isinstance(value, (int, float)):
        return i18n.number(value, lang)
    return str(value)


def projector_board(rows: Iterable[Any], lang: str) -> pd.DataFrame:
    """The class board for a projector, in words."""
    t = i18n.translator(lang)
    return pd.DataFrame([(
        r.nickname, status_text(r.status, lang),
        i18n.percent(1.0 if r.status == "done" else r.progress, lang, 0),
        i18n.percent(r.accuracy, lang, 1)) for r in rows],
        columns=[t("classroom.board.nickname"), t("classroom.board.status"),
                 t("classroom.board.progress"), t("classroom.board.accuracy")])


# ------------------------------------------------------------------- the class experiment
LABELS_UP_TO = 16      # nicknames written beside the points while there are at most this many
CSV_COLUMNS = ("knob", "value", "nickname", "run", "status", "accuracy", "final_loss", "steps")


def _numeric(values: Any) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def log_axis(values: Any) -> bool:
    """A log axis for positive numbers spanning a hundredfold or more (0.0001 … 1)."""
    return _numeric(values) and min(values) > 0 and max(values) >= 100 * min(values)


def experiment_figure(view: Any, lang: str, height: int = 640,
                      font: int | None = None) -> go.Figure:
    """The class's picture, the viewer's own runs thick; ``font``: a projector's type size."""
    t, ex = i18n.translator(lang), view.experiment
    label = knob_label(ex.knob, lang)
    order = list(dict.fromkeys([*ex.values, *(r.value for r in view.rows)]))
    texts = {v: shown(v, lang, ex.knob) for v in order}
    numeric = _numeric(order)
    style = {v: (C.PALETTE[i % len(C.PALETTE)], C.DASHES[i % len(C.DASHES)])
             for i, v in enumerate(order)}

    def who(r: Any) -> str:
        return t("classroom.experiment.you", nickname=r.nickname) if r.you else r.nickname

    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.2 if font else 0.14)
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
    done = [r for r in view.rows if r.accuracy is not None]
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
    if numeric:   # ticks at the values compared, written as the preset form writes them
        axis = dict(type="log" if log_axis(order) else "linear", tickvals=order,
                    ticktext=list(texts.values()))
    else:
        axis = dict(type="category", categoryorder="array", categoryarray=list(texts.values()))
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    fig.update_layout(xaxis_title=t("common.step"), yaxis_title=t("common.loss"),
                      xaxis2=dict(title_text=label, **axis),
                      yaxis2_title=t("classroom.experiment.accuracy_axis"),
                      height=height, margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", y=-0.12, yanchor="top", x=0,
                                  title=dict(text=label, side="top")))
    return C.localized(fig, lang, font=dict(size=font) if font else None)


def experiment_csv(view: Any) -> str:
    """The experiment's runs as CSV: nicknames and run numbers, no person or run ids."""
    rank = {v: i for i, v in enumerate(view.experiment.values)}
    rows = sorted(view.rows, key=lambda r: (rank.get(r.value, len(rank)), r.nickname,
                                            r.run_number))
    return _csv(CSV_COLUMNS, ([
        view.experiment.knob, r.value, r.nickname, r.run_number, r.status,
        "" if r.accuracy is None else f"{r.accuracy:.6f}",
        "" if not r.losses or not math.isfinite(r.losses[-1]) else f"{r.losses[-1]:.6g}",
        r.steps[-1] if r.steps else ""] for r in rows))
