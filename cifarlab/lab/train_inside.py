"""Inside training, on the Train page while a run trains: each layer's gradient norm over the
steps (core/probes.py samples them in the worker), the latest sample as a table, and what it
means for the student in plain words (gradients exploding, vanishing, ReLUs that never fire)."""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from cifarlab import i18n
from cifarlab.core.probes import finite, signals
from cifarlab.lab.charts import series_style
from cifarlab.lab.train_live import layout


def grad_figure(samples: Sequence[dict], lang: str) -> go.Figure:
    """One line per layer: its gradient norm at each sample (log axis: they span decades)."""
    t = i18n.translator(lang)
    df = pd.DataFrame([(s["step"], r["name"], finite(r.get("grad_norm")))
                       for s in samples for r in s["layers"]], columns=["step", "layer", "grad"])
    fig = px.line(df, x="step", y="grad", log_y=True, **series_style("layer"), labels={
        "step": t("common.step"), "grad": t("train.inside.grad_axis"), "layer": ""})
    fig.update_yaxes(dtick="D2")
    return fig.update_layout(layout(lang, t("train.inside.grad_title"), height=300))


def latest_table(samples: Sequence[dict], lang: str) -> pd.DataFrame:
    """The latest sample: each layer's weight norm, gradient norm and silent ReLUs."""
    t = i18n.translator(lang)
    rows = [{t("train.inside.layer"): r["name"],
             t("train.inside.weight_norm"): i18n.significant(r.get("weight_norm"), lang, 3),
             t("train.inside.grad_norm"): i18n.significant(r.get("grad_norm"), lang, 3),
             t("train.inside.dead_col"): i18n.percent(r.get("dead"), lang, 0)}
            for r in (samples[-1]["layers"] if samples else [])]
    return pd.DataFrame(rows)


def signal_texts(samples: Sequence[dict], lang: str) -> list[str]:
    """The signals of ``core.probes.signals`` as sentences in ``lang``."""
    t = i18n.translator(lang)
    out = []
    for code, p in signals(list(samples)):
        if code == "dead":
            p = p | {"share": i18n.percent(p["share"], lang, 0)}
        elif code == "vanishing":
            p = p | {k: i18n.significant(p[k], lang, 2) for k in ("grad", "weight")}
        out.append(t(f"train.inside.{code}", **p))
    return out
