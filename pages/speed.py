"""Speed as a lesson: what each trick buys, from the recorded ablation.

The record (``cifarlab/lab/speed_ablation.json``, made by ``bench/bench_speed.py``) -> the lab's
rows -> one plotly chart and a sentence per trick; a button per row puts that row's settings
into the Train page's knobs, where the student starts it as a run.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from cifarlab.core import shapes
from cifarlab.core.modelspec import net_spec
from cifarlab.lab import speed as lab
from ui import train_form
from ui.language import dur, num, pct, translator

t = translator()


def _put_in_train_page(name: str) -> None:
    """A row button's callback: the Train form takes the row's values (fitted to this
    server's limits; a class's locked knobs keep the class's)."""
    train_form.get().apply_preset(lab.row_knobs(record, name))
    st.session_state["speed_applied"] = name


st.title(t("speed.title"))
st.markdown(t("speed.intro"))

record = lab.load_record()
rows = lab.table_rows(record)
if not rows:
    st.info(t("speed.no_record"))
else:
    machine = record.get("machine", {})
    st.caption(t("speed.row_count", n=len(rows), machine=machine.get("cpu", "?"),
                 date=record.get("date", "?")) + " " + t("speed.shared_machine"))
    st.plotly_chart(lab.figure(rows, t), width="stretch", key="speed_chart")

    if runs := record.get("preset_runs"):
        st.markdown(t("speed.repeats", accs=", ".join(pct(r["accuracy"]) for r in runs),
                      secs=", ".join(dur(r["seconds"]) for r in runs)))

    for n, row in enumerate(rows, 1):
        name = row["name"]
        with st.container(border=True):
            left, right = st.columns([3, 1])
            left.markdown(f"**{n}. {t(f'speed.row_{name}')}** · {pct(row['accuracy'])} · "
                          f"{dur(row['seconds'])}")
            left.markdown(t(f"speed.why_{name}"))
            right.button(t("speed.use_row"), key=f"speed_use_{name}", help=t("speed.use_row_help"),
                         on_click=_put_in_train_page, args=(name,), width="stretch")
            if st.session_state.get("speed_applied") == name:
                st.success(t("speed.applied"))
                st.page_link("pages/train.py", label=t("speed.open_train"),
                             icon=":material/model_training:")

st.subheader(t("speed.network_title"))
traces = shapes.trace_spec(net_spec("bn3"))
st.caption(t("speed.network_caption", params=shapes.total_params(traces)))
KINDS = {k: t(f"network.kind_{k}") for k in ("input", "conv", "pool", "relu", "flatten", "linear")}
KINDS["batchnorm"] = t("speed.kind_batchnorm")
table = shapes.trace_table(traces)
st.dataframe(pd.DataFrame({
    t("network.layer_col"): [r["layer"] for r in table],
    t("network.kind_col"): [KINDS.get(r["kind"], r["kind"]) for r in table],
    t("network.in_shape_col"): [r["input"] for r in table],
    t("network.out_shape_col"): [r["output"] for r in table],
    t("network.params_col"): [num(r["params"]) for r in table],
}), hide_index=True, width="stretch")

st.subheader(t("speed.gpu_title"))
st.markdown(t("speed.gpu_measured"))
