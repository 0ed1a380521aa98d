"""Inside the network: activations, one neuron's sum, conv1's filters, Captum's "why"."""
from __future__ import annotations

import numpy as np
import streamlit as st

from cifarlab.core.config import ACTIVATION_NAMES
from cifarlab.errors import CifarLabError
from cifarlab.lab import inside as I, results as R
from cifarlab.lab.data import upscale
from cifarlab.lab.inside import figures as F
from cifarlab.lab.tables import class_name
from ui.data import get_data
from ui.language import call_or_show, num, show_error, translator
from ui.models import finished_runs, pick_run_model, predictions, random_model, uploaded_picture
from ui.nav import lesson
from ui.widgets import checked_number, clicked_cell

t = translator()
K = "inside_"


@st.cache_data(max_entries=16, show_spinner=False)
def _stages(model_key: str, image_key: str, _model, _x):
    return I.activations(_model, _x)


@st.cache_data(max_entries=16, show_spinner=False)
def _views(model_key: str, image_key: str, target: int, _model, _x):
    return {m: I.explain(_model, _x, target, m) for m in I.METHODS}


def choose_model(classes: int):
    """(model, key, checkpoint or None) chosen by the student, or None."""
    runs = finished_runs() or []
    c1, c2 = st.columns([1, 2])
    source = c1.radio(t("inside.source"), ["run", "random"], horizontal=True, key=K + "source",
                      index=0 if runs else 1, format_func=lambda s: t(f"inside.source_{s}"))
    if source == "run":
        chosen = pick_run_model(c2, runs, K + "run")
        return None if chosen is None else (chosen[0], chosen[2], chosen[1])
    c2.caption(t("inside.random_caption"))
    return random_model(classes), f"random-{classes}", None


def choose_image(model, model_key: str, data, names: list[str]):
    """(pixels HWC uint8, true class index or None, key, words) of the chosen picture."""
    c1, c2 = st.columns([1, 2])
    kind = c1.radio(t("inside.image_source"), ["class", "wrong", "upload"], key=K + "image_kind",
                    format_func=lambda s: t(f"inside.image_{s}"))
    if kind == "class":
        a, b = c2.columns(2)
        cls = a.selectbox(t("inside.pick_class"), range(len(names)), key=K + "class",
                          format_func=lambda i: names[i])
        members = np.flatnonzero(np.asarray(data.test_y) == cls)
        n = checked_number(b, t("inside.pick_nth", n=len(members)), 1, len(members), 1,
                           key=K + "nth")
        if n is None:
            return None
        index = int(members[int(n) - 1])
    elif kind == "wrong":
        with st.spinner(t("inside.finding_mistakes")):
            ev = predictions(model_key, data.key, model, data)
        probs, wrong = ev.probabilities, R.confused_examples(ev, limit=200)
        if not len(wrong):
            c2.info(t("inside.no_mistakes"))
            return None
        labels = F.wrong_options(probs, data.test_y, wrong, names, t)
        index = int(c2.selectbox(t("inside.pick_wrong", n=len(wrong)), list(labels),
                                 key=K + "wrong", format_func=labels.get))
    else:
        got = uploaded_picture(c2, K + "upload", hint=t("inside.upload_hint"))
        if got is None:
            return None
        return got[0].pixels, None, f"upload-{got[1]}", t("inside.your_picture")
    return data.image("test", index), int(data.test_y[index]), f"test-{index}", \
        t("inside.test_image", i=str(index))


def activations_tab(stages, names, model, hwc, words) -> None:
    left, right = st.columns([1, 3])
    left.image(upscale(hwc, 5), width=160, caption=t("inside.as_seen"),
               alt=t("inside.image_alt", image=words,
                     predicted=names[int(np.argmax(I.stage(stages, "softmax").values))]))
    with right:
        st.markdown(t("inside.act_intro"))
        for view in F.stage_views(stages, names, t, ACTIVATION_NAMES[model.activation]):
            st.markdown(f"## {view.heading}")
            st.code(view.line)
            st.plotly_chart(view.figure, key=f"{K}stage_{view.name}", alt=view.alt)
            if view.caption:
                st.caption(view.caption)
        st.expander(t("a11y.show_table")).table(F.scores_table(stages, names, t))


@st.fragment
def neuron_tab(model, x, stages, hwc) -> None:
    """A fragment: a click on the map reruns this tab alone, not the whole page."""
    ss = st.session_state
    st.markdown(t("inside.neuron_intro"))
    a, b = st.columns(2)
    layer = a.radio(t("inside.layer"), list(I.CONV_LAYERS), horizontal=True, key=K + "layer",
                    persist_state="page")
    fmap_all = I.stage(stages, layer).values
    channels, h, w = fmap_all.shape
    if not 0 <= ss.get(K + "channel", 0) < channels:   # conv2 had more maps
        ss[K + "channel"] = 0
    channel = b.selectbox(t("inside.channel"), range(channels), key=K + "channel",
                          format_func=lambda i: t("inside.map_n", n=i + 1), persist_state="page")
    # A click on the map sets the two boxes below, before they are drawn (they work alone too).
    pick = clicked_cell(ss.get(K + "pick"))
    if pick is not None and pick != ss.get(K + "last_pick"):
        ss[K + "row"], ss[K + "col"] = ss[K + "last_pick"] = pick
    for key, hi in ((K + "row", h), (K + "col", w)):
        value = ss.get(key, hi // 2)
        ss[key] = value if isinstance(value, int) and 0 <= value < hi else hi // 2
    left, right = st.columns([3, 2])
    fig = F.pick_figure(fmap_all[channel], ss[K + "row"], ss[K + "col"],
                        t("inside.pick_title", layer=layer, n=channel + 1, h=h, w=w), t)
    left.plotly_chart(fig, key=K + "pick", on_select="rerun", selection_mode="points",
                      alt=t("inside.pick_alt", layer=layer, n=channel + 1, h=h, w=w))
    right.caption(t("inside.pick_hint"))
    r = checked_number(right, t("inside.row", hi=h - 1), 0, h - 1, None, key=K + "row",
                       persist_state="page")
    c = checked_number(right, t("inside.col", hi=w - 1), 0, w - 1, None, key=K + "col",
                       persist_state="page")
    if r is None or c is None:
        return
    n = I.neuron(model, x, layer, int(channel), int(r), int(c), stages)
    k, n_in = n["kernel"].shape[-1], n["window"].shape[0]
    if layer == "conv1":
        right.plotly_chart(F.image_figure(hwc, t("inside.window_on_image"),
                                          (max(0, n["top"]), max(0, n["left"]), k), height=280,
                                          lang=t.lang),
                           key=K + "window_image",
                           alt=t("inside.window_alt", top=n["top"], left=n["left"], k=k))
    else:
        right.markdown(t("inside.conv2_source", c=n_in, k=k))
    st.markdown(f"## {t('inside.arith_title', layer=layer, n=channel + 1, row=r, col=c)}")
    fig, table = F.neuron_view(n, t)
    st.plotly_chart(fig, key=K + "arith", alt=t("inside.arith_alt", c=n_in, k=k))
    if n_in > F.MAX_CHANNELS:
        st.caption(t("inside.first_channels", n=F.MAX_CHANNELS, c=n_in))
    then = t("inside.arith_relu" if model.activation == "relu" else "inside.arith_act",
             act=ACTIVATION_NAMES[model.activation], out=num(n["activated"], 4))
    st.markdown(t("inside.arith_sum", n=n["products"].size, c=n_in, k=k, total=num(n["sum"], 4),
                  bias=num(n["bias"], 4), value=num(n["output"], 4), then=then))
    if n["match"]:
        st.success(t("inside.torch_agrees", value=num(n["torch_output"], 4),
                     shown=num(float(fmap_all[channel, r, c]), 4)))
    else:
        st.error(t("inside.torch_differs", value=num(n["torch_output"], 4)))
    st.expander(t("a11y.show_table")).dataframe(table, hide_index=True)


def filters_tab(model, ckpt) -> None:
    st.markdown(t("inside.filters_intro"))
    after = model.conv1.weight
    # the weights the run started from: its seed makes them again
    before = None if ckpt is None else I.initial_model(ckpt.config, len(ckpt.classes)).conv1.weight
    st.caption(t("inside.filters_random") if ckpt is None
               else t("inside.filters_seed", seed=ckpt.config.seed))
    fig, table = F.filters_view(after, before, t)
    c = after.shape[0]
    st.plotly_chart(fig, key=K + "filters", alt=t("inside.filters_alt", n=c, k=after.shape[-1]))
    if c > F.MAX_FILTERS:
        st.caption(t("inside.first_filters", n=F.MAX_FILTERS, c=c))
    st.caption(t("inside.filters_scale"))
    st.expander(t("a11y.show_table")).table(table)


def why_tab(model, model_key, image_key, x, hwc, stages, true_cls, names) -> None:
    """The predicted class beside the true one (the runner-up when the network is right)."""
    st.markdown(t("inside.why_intro"))
    probs = I.stage(stages, "softmax").values
    targets = F.why_targets(probs, true_cls, names, t)
    with st.spinner(t("inside.explaining")):
        views = call_or_show(lambda: {cls: _views(model_key, image_key, cls, model, x)
                                      for cls, _ in targets})
    if views is None:
        return
    fig, table = F.why_view(hwc, views, targets, names, t)
    st.plotly_chart(fig, key=K + "why", alt=t("inside.why_alt", n=len(targets)))
    seconds = [v.seconds for cls, _ in targets for v in views[cls].values()]
    st.caption(t("inside.why_legend") + " " + t("inside.why_times", lo=num(1000 * min(seconds), 0),
                                                   hi=num(1000 * max(seconds), 0)))
    st.expander(t("a11y.show_table")).table(table)
    for m in I.METHODS:
        st.markdown(f"**{t(f'inside.method_{m}')}**: {t(f'inside.explain_{m}')}")


st.title(t("nav.inside"))
data = get_data()
names = [class_name(c, t.lang) for c in data.classes]
chosen = choose_model(len(data.classes))
if chosen is not None and chosen[0].fc3.out_features != len(data.classes):
    st.error(t("errors.checkpoint.other_classes", n=chosen[0].fc3.out_features,
               classes=len(data.classes)))
    chosen = None
picked = choose_image(chosen[0], chosen[1], data, names) if chosen is not None else None
stages = None
if chosen is not None and picked is not None:
    model, model_key, ckpt = chosen
    hwc, true_cls, image_key, words = picked
    try:
        x = I.to_input(hwc)
        stages = _stages(model_key, image_key, model, x)
    except CifarLabError as err:
        show_error(err)
    else:
        st.markdown(F.summary(stages, words, true_cls, names, t))
# Only the open tab runs (its widgets keep their values): Captum works when a student asks "why".
tabs = st.tabs([t("lesson.title"), t("inside.act_title"), t("inside.neuron_title"),
                t("inside.filters_title"), t("inside.why_title")], default=t("inside.act_title"),
               key=K + "tab", on_change="rerun")
shown = next(i for i, tab in enumerate(tabs) if tab.open)
with tabs[shown]:
    if shown == 0:
        lesson("inside")
    elif stages is None:
        st.info(t("inside.choose_first"))
    elif shown == 1:
        activations_tab(stages, names, model, hwc, words)
    elif shown == 2:
        neuron_tab(model, x, stages, hwc)
    elif shown == 3:
        filters_tab(model, ckpt)
    else:
        why_tab(model, model_key, image_key, x, hwc, stages, true_cls, names)
