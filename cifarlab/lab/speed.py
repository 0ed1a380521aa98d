"""The Speed page's ablation: one trick a row from the tutorial to ``one_minute_cpu``."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import plotly.graph_objects as go

from cifarlab import i18n
from cifarlab.core.config import TrainConfig
from cifarlab.lab import charts as C

RECORD = Path(__file__).with_name("speed_ablation.json")

# Each row keeps the rows before it and changes these knobs.
ROWS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("tutorial", {"epochs": 1}),
    ("fast_batch", {"pipeline": "fast", "batch_size": 256, "lr": 0.05}),
    ("bn3", {"net": "bn3", "lr": 0.1}),
    ("augment", {"augment": "flip"}),
    ("label_smoothing", {"label_smoothing": 0.1}),
    ("nesterov_onecycle", {"nesterov": True, "weight_decay": 0.0005, "schedule": "onecycle",
                           "lr": 0.2}),
    ("tta", {"tta": True}),
    ("second_epoch", {"epochs": 2}),   # what the minute has room for (docs/benchmarks.md §13)
)
ROW_NAMES = tuple(name for name, _ in ROWS)


def row_configs(base: TrainConfig | None = None) -> list[tuple[str, TrainConfig]]:
    """Each row's config, cumulative (``base``: the tutorial's, with e.g. a device or seed)."""
    config = base or TrainConfig()
    out = []
    for name, changes in ROWS:
        config = config.replace(**changes)
        out.append((name, config))
    return out


def load_record(path: str | Path | None = None) -> dict | None:
    """The recorded ablation (None when there is none, or it cannot be read)."""
    try:
        return json.loads(Path(path or RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def table_rows(record: Mapping[str, Any] | None) -> list[dict]:
    """The measured rows in the ablation's order: name, accuracy (0..1), seconds, config."""
    measured = {r.get("name"): r for r in (record or {}).get("rows", [])}
    return [dict(measured[n]) for n in ROW_NAMES if n in measured]


def row_knobs(row: Mapping[str, Any]) -> dict[str, Any]:
    """A measured row's preset knobs; the benchmark's subset is left to the student."""
    config = TrainConfig.from_dict(row["config"])
    return {**config.knob_values(preset_only=True), "train_subset": None}


def figure(rows: list[dict], t) -> go.Figure:
    """Accuracy (bars, left axis) and training time (line, right axis) per row."""
    x = [t(f"speed.row_{r['name']}") for r in rows]
    fig = go.Figure()
    fig.add_bar(x=x, y=[r["accuracy"] for r in rows], name=t("speed.accuracy"),
                marker_color=C.PALETTE[0], textposition="outside", yaxis="y",
                text=[i18n.percent(r["accuracy"], t.lang) for r in rows],
                hovertemplate="%{x}: %{y:.1%}<extra></extra>")
    fig.add_scatter(x=x, y=[r["seconds"] for r in rows], name=t("speed.seconds"),
                    mode="lines+markers", marker_color=C.PALETTE[5], line=dict(dash="dash"),
                    yaxis="y2", hovertemplate="%{x}: %{y:.0f} s<extra></extra>")
    return C.localized(
        fig, t.lang, template="none", **C.title_over_legend(t("speed.chart_title"), 110),
        height=470, yaxis=dict(title=t("speed.accuracy"), tickformat=".0%", range=[0, 1]),
        yaxis2=dict(title=t("speed.seconds"), overlaying="y", side="right", rangemode="tozero",
                    tickformat=",.0f"))
