"""bench/bench_watchers.py's bookkeeping: the step in a progress text, percentiles, the delay
from a written progress step to a watcher seeing it, and the gate. No server."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from bench_watchers import judge, percentile, step_of, update_delays

from cifarlab import i18n


def test_step_of_reads_the_english_progress_bar():
    text = i18n.translator("en")("train.progress", step=12345, total=37500) + " · 3 min left"
    assert step_of(text) == 12345
    assert step_of("Step 7 of 9") == 7
    assert step_of("no number") is None


def test_percentile_is_nearest_rank():
    xs = list(range(1, 101))           # 1..100
    assert percentile(xs, 95) == 95
    assert percentile(xs, 50) == 50
    assert percentile(xs, 100) == 100
    assert percentile([3.0], 95) == 3.0
    assert math.isnan(percentile([], 95))
    assert percentile([5, 1, 4, 2, 3], 60) == 3   # unsorted input


def test_update_delay_is_until_that_step_or_a_later_one_is_seen():
    written = [(10.0, 100), (10.5, 150), (11.0, 200), (13.0, 300)]
    # the watcher polls at 10.2 (shows 100), 12.1 (shows 200: 150 was skipped), 14.0 (stale 200)
    seen = [(12.1, 200), (10.2, 100), (14.0, 200)]
    delays, missed = update_delays(written, seen)
    assert delays == pytest.approx([0.2, 1.6, 1.1])
    assert missed == 1                  # step 300 never reached this watcher


def test_a_sighting_before_the_write_does_not_count():
    # the same step number shown before it was written (an older run): not an answer
    delays, missed = update_delays([(5.0, 10)], [(4.0, 10), (6.5, 12)])
    assert delays == pytest.approx([1.5])
    assert missed == 0


def test_judge_gates_on_the_answer_p95_and_on_every_rerun_answered():
    fast = [0.1] * 19 + [2.0]           # p95 is 0.1: one slow answer in twenty passes
    row = judge(fast, 0, [1.0, 2.0], 0)
    assert row["holds"] and row["answered"] == 1.0 and row["answer_max_s"] == 2.0
    assert row["update_p95_s"] == 2.0   # reported, not gated
    assert not judge([0.1] * 18 + [2.0, 2.0], 0, [], 0)["holds"]   # p95 is 2.0
    unanswered = judge(fast, 1, [], 3)
    assert not unanswered["holds"] and unanswered["answered"] == pytest.approx(20 / 21)
    assert unanswered["updates_missed"] == 3
    assert not judge([], 0, [], 0)["holds"]        # nothing asked: nothing shown to hold
