"""The classroom pages' tables, words, join link and charts, in the page's language; serve's
records are read by attribute only (lab never imports serve)."""
from __future__ import annotations

import io
import time
from typing import Any, Iterable
from urllib.parse import urlencode, urlsplit

import pandas as pd
import plotly.graph_objects as go

from cifarlab import i18n
from cifarlab.core.config import knobs
from cifarlab.lab import charts as C

CODE_PARAM = "class"   # the join link's query parameter (Home fills the code in from it)


def clock(ts: float | None) -> str:
    """A moment as the room's wall clock shows it ("14:05:09"); "–" when there is none."""
    return "–" if ts is None else time.strftime("%H:%M:%S", time.localtime(ts))


def status_text(status: str, lang: str) -> str:
    """A run's status as one word (the board has its own column for the place in the queue)."""
    key = "status.in_queue" if status == "queued" else f"status.{status}"
    return i18n.t(key, lang) if key in i18n.catalog(lang) else status


def board_table(rows: Iterable[Any], lang: str) -> pd.DataFrame:
    """The live board, a row a run (its loss a list, for a sparkline column)."""
    return pd.DataFrame([{
        "nickname": r.nickname, "status": status_text(r.status, lang),
        "queue": r.queue_position, "loss": list(r.losses), "progress": r.progress,
        "accuracy": None if r.accuracy is None else 100 * r.accuracy,
        "device": r.device, "started": clock(r.created_at)} for r in rows],
        columns=["nickname", "status", "queue", "loss", "progress", "accuracy", "device",
                 "started"])


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


def qr_png(text: str) -> bytes:
    import segno

    out = io.BytesIO()
    segno.make(text, error="m").save(out, kind="png", scale=6, border=2)
    return out.getvalue()


def _knob(name: str) -> Any:
    return next((f for f in knobs() if f.name == name), None)


def knob_label(name: str, lang: str) -> str:
    f = _knob(name)
    return i18n.t(f.knob.label, lang) if f is not None else name


def shown(value: Any, lang: str, name: str = "") -> str:
    """A value of knob ``name`` in words, as the Train page gives it."""
    t, f = i18n.translator(lang), _knob(name)
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


def seed_warning(info: Any, lang: str) -> str | None:
    """Why a locked seed spoils a challenge (None when free: each student has their own)."""
    if "seed" not in info.locked:
        return None
    return i18n.t("classroom.challenge.seed_locked", lang,
                  seed=shown(info.preset.get("seed", 0), lang))


def presenter_figure(pinned: Any, lang: str) -> go.Figure:
    """The pinned run's loss in large type, with the tutorial's running loss over it."""
    t = i18n.translator(lang)
    data = [go.Scatter(x=list(pinned.steps), y=list(pinned.losses), mode="lines",
                       line=dict(width=3, color=C.PALETTE[0]),
                       name=t("train.chart_step_loss_mean", n=pinned.stride))]
    if pinned.running_steps:
        data.append(go.Scatter(x=list(pinned.running_steps), y=list(pinned.running_losses),
                               mode="lines+markers", line=dict(width=5, color=C.PALETTE[5]),
                               marker=dict(size=14), name=t("train.running_loss")))
    # the layout's type size is every text's (axes, ticks, legend)
    return C.localized(go.Figure(data), lang, template="none", height=430, font=dict(size=22),
                       margin=dict(l=90, r=20, t=60, b=80), xaxis_title=t("common.step"),
                       yaxis_title=t("common.loss"),
                       legend=dict(orientation="h", y=1.02, yanchor="bottom", x=0))


def projector_board(rows: Iterable[Any], lang: str) -> pd.DataFrame:
    """The class board for a projector, in words."""
    t = i18n.translator(lang)
    return pd.DataFrame([(
        r.nickname, status_text(r.status, lang),
        i18n.percent(1.0, lang, 0) if r.status == "done" else
        i18n.percent(r.progress, lang, 0), i18n.percent(r.accuracy, lang, 1)) for r in rows],
        columns=[t("classroom.board.nickname"), t("classroom.board.status"),
                 t("classroom.board.progress"), t("classroom.board.accuracy")])
