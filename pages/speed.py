"""Speed as a lesson: what each trick buys, from the recorded ablation."""
from __future__ import annotations

import streamlit as st

from cifarlab.core import shapes
from cifarlab.core.modelspec import net_spec
from cifarlab.lab import speed as lab
from cifarlab.lab.network import figures as F
from ui import train_form
from ui.language import dur, pct, translator

t = translator()


def _put_in_train_page(row: dict) -> None:
    """A row button's callback: the Train form takes the row's values (within its limits)."""
    train_form.get().apply_preset(lab.row_knobs(row))
    st.session_state["speed_applied"] = row["name"]


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
    st.plotly_chart(lab.figure(rows, t), width="stretch", key="speed_chart",
                    alt=t("a11y.speed_chart"))

    for n, row in enumerate(rows, 1):
        name = row["name"]
        with st.container(border=True):
            left, right = st.columns([3, 1])
            left.markdown(f"**{n}. {t(f'speed.row_{name}')}** · {pct(row['accuracy'])} · "
                          f"{dur(row['seconds'])}")
            left.markdown(t(f"speed.why_{name}"))
            right.button(t("speed.use_row"), key=f"speed_use_{name}", help=t("speed.use_row_help"),
                         on_click=_put_in_train_page, args=(row,), width="stretch")
            if st.session_state.get("speed_applied") == name:
                st.success(t("speed.applied"))
                st.page_link("pages/train.py", label=t("speed.open_train"),
                             icon=":material/model_training:")

st.subheader(t("speed.network_title"))
traces = shapes.trace_spec(net_spec("bn3"))
st.caption(t("speed.network_caption", params=shapes.total_params(traces)))
table = [{**r, "kind": t("speed.kind_batchnorm") if r["kind"] == "batchnorm" else r["kind"]}
         for r in shapes.trace_table(traces)]   # the Network page's table knows no batchnorm
st.dataframe(F.shape_table(table, t), hide_index=True, width="stretch")

st.subheader(t("speed.gpu_title"))
st.markdown(t("speed.gpu_measured"))
