"""The classroom page's tables and words (pages/classroom.py; the classroom itself, its roles
and its rules, is ``cifarlab.serve.classroom``): the live board and the leaderboards as pandas
tables, a challenge's goal in words, in the page's language. Rows are the serving side's
records (``BoardRow``, ``LeaderRow``, ``Goal``), read by attribute only: lab never imports
serve.

    board_table(cr.board(me, code), "es")    # one row per run, loss curves as lists
    goal_text(info.challenge.goal, "pt")     # "A melhor acurácia no teste, épocas ≤ 2, em cpu"
"""
from __future__ import annotations

import time
from typing import Any, Iterable

import pandas as pd

from cifarlab import i18n


def clock(ts: float | None) -> str:
    """A moment as the room's wall clock shows it ("14:05:09"); "–" when there is none."""
    return "–" if ts is None else time.strftime("%H:%M:%S", time.localtime(ts))


def status_text(status: str, lang: str) -> str:
    """A run's status as one word (the board has its own column for the place in the queue)."""
    t = i18n.translator(lang)
    if status == "queued":
        return t("status.in_queue")
    key = f"status.{status}"
    return t(key) if key in i18n.catalog(lang) else status


def board_table(rows: Iterable[Any], lang: str) -> pd.DataFrame:
    """The live board: nickname, status, place in the queue, the loss curve (a list, for a
    sparkline column), progress (0..1), accuracy in percent, device, the time it was queued."""
    return pd.DataFrame([{
        "nickname": r.nickname, "status": status_text(r.status, lang),
        "queue": r.queue_position, "loss": list(r.losses), "progress": r.progress,
        "accuracy": None if r.accuracy is None else 100 * r.accuracy,
        "device": r.device, "started": clock(r.created_at)} for r in rows],
        columns=["nickname", "status", "queue", "loss", "progress", "accuracy", "device",
                 "started"])


def leader_table(rows: Iterable[Any], kind: str, lang: str) -> pd.DataFrame:
    """A leaderboard, its columns named in ``lang`` and indexed by place: the score on that
    board's half (accuracy, or training seconds for "fastest_to"), the accuracy on the whole
    test set, the time the run finished."""
    t = i18n.translator(lang)
    score = t("classroom.challenge.score_seconds" if kind == "fastest_to"
              else "classroom.challenge.score_accuracy")
    rank = t("classroom.challenge.rank")
    table = pd.DataFrame([{
        rank: r.rank, t("classroom.board.nickname"): r.nickname,
        score: (i18n.number(round(r.score, 1), lang) if kind == "fastest_to"
                else i18n.percent(r.score, lang, 1)),
        t("classroom.challenge.accuracy"): i18n.percent(r.accuracy, lang, 1),
        t("classroom.challenge.finished"): clock(r.finished_at)} for r in rows])
    return table.set_index(rank) if len(table) else table


def goal_text(goal: Any, lang: str) -> str:
    """A challenge's goal in words, in ``lang``."""
    t = i18n.translator(lang)
    if goal.kind == "fastest_to":
        return t("classroom.challenge.goal_fastest_to",
                 target=i18n.percent(goal.target or 0, lang, 0))
    device = goal.device or t("classroom.challenge.device_any")
    if goal.max_epochs is None:
        return t("classroom.challenge.goal_best_accuracy_any", device=device)
    return t("classroom.challenge.goal_best_accuracy", epochs=goal.max_epochs, device=device)
