"""Loss & Optimizer: cross-entropy by hand on one image; SGD with and without momentum."""
from __future__ import annotations

import numpy as np
import streamlit as st

from cifarlab.lab import loss as optimlab
from ui.data import get_data
from ui.language import num, translator
from ui.nav import lesson
from ui.widgets import checked_number

t = translator()
LRS = [0.001, 0.003, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5]

st.title(t("nav.loss"))
# only the open tab runs; its widgets keep their values meanwhile (persist_state)
tab_lesson, tab_ce, tab_opt = st.tabs([t("lesson.title"), t("loss.logits_title"),
                                       t("loss.optimizer_title")],
                                      key="loss_tab", on_change="rerun")
KEEP = "page"


def cross_entropy() -> None:
    data = get_data()
    st.markdown(t("loss.ce_intro"))
    cols = st.columns([1, 2])
    index = checked_number(cols[0], t("loss.image_index", n=data.n_test - 1), 0, data.n_test - 1,
                           3, key="loss_index", persist_state=KEEP)
    if index is not None:   # else: the box says why, no result
        index = int(index)
        label = int(data.test_y[index])
        names = [t(f"classes.{c}") for c in data.classes]
        boost = cols[1].slider(t("loss.boost", name=names[label]), -5.0, 10.0, 0.0, 0.5,
                               key="loss_boost", help=t("loss.boost_help"), persist_state=KEEP)
        logits = optimlab.net_logits(np.asarray(data.test_x[index]))   # an untrained Net
        logits[label] += boost
        ce = optimlab.cross_entropy_by_hand(logits, label)

        left, right = st.columns([1, 3])
        left.image(data.image("test", index), width=160,
                   alt=t("a11y.test_image_n", i=index, cls=names[label]))
        left.markdown(f"{t('loss.true_class')}: **{names[label]}**")
        left.markdown(f"{t('loss.predicted')}: **{names[ce['prediction']]}**")
        right.plotly_chart(optimlab.probs_figure(ce, names, label, t),
                           key="loss_probs", alt=t("a11y.probs_chart"))
        st.dataframe(optimlab.ce_table(ce, names, t), hide_index=True, key="loss_table")
        st.markdown(t("loss.steps_by_hand", shift=num(ce["shift"], 4), total=num(ce["sum_exp"], 4),
                      name=names[label], p=num(ce["p_true"], 4)))
        st.markdown(t("loss.loss_value", p=num(ce["p_true"], 4), loss=num(ce["loss"], 4)))
        m1, m2 = st.columns(2)
        m1.metric(t("loss.by_hand"), num(ce["loss"], 6))
        m2.metric(t("loss.pytorch"), num(ce["torch_loss"], 6))
        (st.success if ce["match"] else st.error)(t("loss.agree" if ce["match"]
                                                    else "loss.disagree"))
        st.caption(t("loss.chance_loss"))


def optimizer() -> None:
    st.markdown(t("loss.opt_intro"))
    cols = st.columns(4)
    surface = cols[0].selectbox(t("loss.surface"), list(optimlab.SURFACES), key="opt_surface",
                                index=list(optimlab.SURFACES).index(optimlab.DEMO["surface"]),
                                format_func=lambda s: t(f"loss.surface_{s}"),
                                persist_state=KEEP)
    lr = cols[1].select_slider(t("common.lr"), LRS, value=optimlab.DEMO["lr"], key="opt_lr",
                               format_func=num, help=t("common.lr_help"), persist_state=KEEP)
    momentum = cols[2].slider(t("common.momentum"), 0.0, 0.99, optimlab.DEMO["momentum"], 0.01,
                              key="opt_momentum", help=t("common.momentum_help"),
                              persist_state=KEEP)
    steps = cols[3].slider(t("loss.steps"), 1, 300, optimlab.DEMO["steps"], key="opt_steps",
                            persist_state=KEEP)
    # the widgets hold only values sgd_path accepts
    surf = optimlab.loss_surface(surface, grid=121)
    paths = {"plain": optimlab.sgd_path(surface, None, lr, 0.0, steps),
             "momentum": optimlab.sgd_path(surface, None, lr, momentum, steps)}
    labels = {"plain": t("loss.plain_sgd"),
              "momentum": t("loss.sgd_momentum_value", m=num(momentum))}
    contour, curves = optimlab.paths_figures(surf, paths, labels, t)
    left, right = st.columns([3, 2])
    left.plotly_chart(contour, key="opt_contour", alt=t("a11y.contour_chart"))
    right.plotly_chart(curves, key="opt_losses", alt=t("a11y.losses_chart"))
    for key, path in paths.items():
        kind, text = optimlab.path_verdict(path, labels[key], t)
        getattr(st, kind)(text)
    if surface == "mountains":
        st.markdown(t("loss.mountains_note"))
    st.markdown(t("loss.update_rule"))   # the tutorial's optimizer lines: the lesson's code


for tab, draw in ((tab_lesson, lambda: lesson("loss")), (tab_ce, cross_entropy),
                  (tab_opt, optimizer)):
    if tab.open:
        with tab:
            draw()
