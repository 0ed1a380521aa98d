"""The Train page's "inside training" part (not a page): each layer's gradients while the run
trains, and what they say in plain words (cifarlab/lab/train_live.py builds it all)."""
from __future__ import annotations

import streamlit as st

from cifarlab.lab import train_live as words
from ui.language import translator


def show(view) -> None:
    """Under the run's charts; open by itself when a signal needs the student's eye."""
    samples, t = view.inside, translator()
    if not samples:
        return
    warnings = words.signal_texts(samples, t.lang)
    for text in warnings:
        st.warning(text, icon=":material/monitor_heart:")
    with st.expander(t("train.inside.title"), expanded=bool(warnings),
                     icon=":material/monitor_heart:"):
        st.caption(t("train.inside.intro"))
        fig = view.memoized("inside", (len(samples), t.lang),
                            lambda _: words.grad_figure(samples, t.lang))
        st.plotly_chart(fig, width="stretch", key="train_inside_chart",
                        config={"displayModeBar": False})
        st.dataframe(words.latest_table(samples, t.lang), hide_index=True, width="stretch")
