"""Inside the network: one test image (or the student's own picture) through a finished run's
network or the tutorial's Net with random weights: every activation with its shape, one
neuron's arithmetic (click a feature map), conv1's filters before and after training, and
Captum's four answers to "why this class"."""
from __future__ import annotations

import hashlib
from datetime import datetime

import numpy as np
import pandas as pd
import streamlit as st

from cifarlab.core.config import CIFAR10_CLASSES
from cifarlab.errors import CifarLabError
from cifarlab.lab import inside as I
from cifarlab.lab import results as R
from cifarlab.lab.inside import figures as F
from cifarlab.serve import queue as jobs
from cifarlab.serve.queue import FINISHED
from pages.common import (checked_number, get_data, lesson, localize, num, pct, session_id,
                          show_error, translator)
from pages.common import queue as job_queue

t = translator()
K = "inside_"
MAX_MAPS = 16


def cls_name(name: str) -> str:
    return t(f"classes.{name}") if name in CIFAR10_CLASSES else str(name)


def shape_text(shape) -> str:
    return "×".join(str(n) for n in shape)


def chart(fig, key: str, alt: str, **kw):
    return st.plotly_chart(localize(fig), width="stretch", key=K + key, alt=alt, **kw)


# ------------------------------------------------------------------------- cached model work

@st.cache_resource(max_entries=4, show_spinner=False)
def _run_model(session: str, run_id: str, mtime: float):
    return R.load_run_model(jobs.get_queue().checkpoint(session, run_id))


@st.cache_resource(max_entries=4, show_spinner=False)
def _random_model(seed: int, classes: int):
    return I.random_model(seed, classes=classes)


@st.cache_resource(max_entries=4, show_spinner=False)
def _initial_model(model_key: str, _config, classes: int):
    return I.initial_model(_config, classes)


@st.cache_data(max_entries=4, show_spinner=False)
def _predictions(model_key: str, data_key: str, _model, _data):
    return R.predictions_for(_model, _data).probabilities


@st.cache_data(max_entries=16, show_spinner=False)
def _stages(model_key: str, image_key: str, _model, _x):
    return I.activations(_model, _x)


@st.cache_data(max_entries=16, show_spinner=False)
def _views(model_key: str, image_key: str, target: int, _model, _x):
    return I.explain_all(_model, _x, target)


# ------------------------------------------------------------------------------ the choices

def choose_model(classes: int):
    """(model, key, checkpoint or None) chosen by the student, or None (the page stops)."""
    sid = session_id()
    queue = job_queue()
    try:
        runs = [r for r in queue.runs(sid, statuses=FINISHED, kind="train")
                if queue.checkpoint(sid, r.id).is_file()]
    except CifarLabError as err:
        show_error(err)
        runs = []
    c1, c2 = st.columns([1, 2])
    source = c1.radio(t("inside.source"), ["run", "random"], horizontal=True, key=K + "source",
                      index=0 if runs else 1, format_func=lambda s: t(f"inside.source_{s}"))
    if source == "random":
        seed = checked_number(c2, t("common.seed"), 0, 10_000, 0, key=K + "seed",
                              help=t("inside.seed_help"))
        if seed is None:
            return None
        c2.caption(t("inside.random_caption"))
        return _random_model(int(seed), classes), f"random-{int(seed)}-{classes}", None
    if not runs:
        c2.info(t("results.no_runs"), icon=":material/info:")
        c2.page_link("pages/train.py", label=t("results.go_train"),
                     icon=":material/model_training:")
        return None
    by_id = {r.id: r for r in runs}

    def label(rid: str) -> str:
        run = by_id[rid]
        when = datetime.fromtimestamp(run.started_at or run.created_at).strftime("%d/%m %H:%M")
        acc = (run.result or {}).get("test_accuracy")
        text = t("results.run_option", id=run.id[:8], when=when,
                 acc=num(100 * acc, 1) if isinstance(acc, (int, float)) else "–")
        return f"{run.name} · {text}" if run.name else text

    labels = {rid: label(rid) for rid in by_id}   # formatted now, in this run's language
    run_id = c2.selectbox(t("results.choose_run"), list(by_id), key=K + "run",
                          format_func=labels.get)
    path = queue.checkpoint(sid, run_id)
    try:
        with st.spinner(t("results.loading_model")):
            model, ckpt = _run_model(sid, run_id, path.stat().st_mtime)
    except (CifarLabError, OSError) as err:
        st.error(t("errors.checkpoint_bad", message=err.text(t.lang) if isinstance(
            err, CifarLabError) else t("errors.unexpected_plain")))
        return None
    return model, f"run-{run_id}-{path.stat().st_mtime}", ckpt


def choose_image(model, model_key: str, data):
    """(pixels HWC uint8, true class index or None, key, words) of the chosen picture."""
    names = [cls_name(c) for c in data.classes]
    c1, c2 = st.columns([1, 2])
    kind = c1.radio(t("inside.image_source"), ["class", "wrong", "upload"], key=K + "image_kind",
                    format_func=lambda s: t(f"inside.image_{s}"))
    if kind == "class":
        a, b = c2.columns(2)
        cls = a.selectbox(t("inside.pick_class"), range(len(names)), key=K + "class",
                          format_func=lambda i: names[i])
        members = I.class_members(data.test_y, cls)
        n = checked_number(b, t("inside.pick_nth", n=len(members)), 1, len(members), 1,
                           key=K + "nth")
        if n is None:
            return None
        index = int(members[int(n) - 1])
    elif kind == "wrong":
        with st.spinner(t("inside.finding_mistakes")):
            probs = _predictions(model_key, data.key, model, data)
        wrong = I.misclassified(probs, data.test_y, limit=200)
        if not len(wrong):
            c2.info(t("inside.no_mistakes"))
            return None

        def wrong_label(i: int) -> str:
            p = int(probs[i].argmax())
            return t("inside.wrong_option", i=str(i), true=names[int(data.test_y[i])],
                     predicted=names[p], p=pct(float(probs[i, p]), 0))

        labels = {int(i): wrong_label(int(i)) for i in wrong}
        index = int(c2.selectbox(t("inside.pick_wrong", n=len(wrong)), list(labels),
                                 key=K + "wrong", format_func=labels.get))
    else:
        up = c2.file_uploader(t("results.upload_image"), key=K + "upload",
                              help=t("results.upload_help"), max_upload_size=R.UPLOADER_MB)
        if up is None:
            c2.info(t("inside.upload_hint"))
            return None
        try:
            prepared = R.prepare_image(up.getvalue())
        except CifarLabError as err:
            show_error(err)
            return None
        for code, params in prepared.notes:
            c2.caption(t(f"results.note_{code}", **params))
        digest = hashlib.sha256(up.getvalue()).hexdigest()[:16]
        return prepared.pixels, None, f"upload-{digest}", t("inside.your_picture")
    return data.image("test", index), int(data.test_y[index]), f"test-{index}", \
        t("inside.test_image", i=str(index))


# ----------------------------------------------------------------------------------- views

def activations_tab(stages, names) -> None:
    st.markdown(t("inside.act_intro"))
    rows = []
    for s in stages:
        v = s.values
        rows.append({t("inside.col_stage"): s.name, t("inside.col_code"): s.line,
                     t("inside.col_shape"): shape_text(s.shape),
                     t("inside.col_min"): num(float(v.min()), 3),
                     t("inside.col_max"): num(float(v.max()), 3),
                     t("inside.col_zeros"): pct(float((v == 0).mean()), 0)})
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key=K + "stage_table",
                 height=35 * (len(rows) + 1) + 3)
    for name, signed in (("conv1", True), ("pool1", False), ("conv2", True), ("pool2", False)):
        s = I.stage(stages, name)
        c = s.shape[0]
        n = min(c, MAX_MAPS)
        st.markdown(f"## {t(f'inside.stage_{name}')} · `{shape_text(s.shape)}`")
        st.code(s.line, language="python")
        fig = F.maps_figure(s.values[:n], [t("inside.map_n", n=i + 1) for i in range(n)],
                            t("inside.maps_title" if signed else "inside.maps_title_positive",
                              n=n, c=c), signed)
        chart(fig, f"maps_{name}", t("inside.maps_alt", layer=name, n=n, h=s.shape[1],
                                     w=s.shape[2]))
        if n < c:
            st.caption(t("inside.first_maps", n=n, c=c))
    for name, key, labels in (("flatten", "values", None), ("relu3", "values", None),
                              ("relu4", "values", None), ("fc3", "scores", names),
                              ("softmax", "probabilities", names)):
        s = I.stage(stages, name)
        st.markdown(f"## {t(f'inside.stage_{name}')} · `{shape_text(s.shape)}`")
        st.code(s.line, language="python")
        best = int(np.argmax(s.values)) if labels is not None else None
        fig = F.vector_figure(s.values, "", t("inside.x_class") if labels else t("inside.x_index"),
                              t(f"inside.y_{key}"), names=labels, highlight=best)
        chart(fig, f"vec_{name}", t("inside.vector_alt", layer=name, n=s.shape[0]))
    with st.expander(t("a11y.show_table")):
        probs = I.stage(stages, "softmax").values
        logits = I.stage(stages, "fc3").values
        st.table(pd.DataFrame({t("a11y.class_col"): names,
                               t("inside.y_scores"): [num(float(v), 3) for v in logits],
                               t("inside.y_probabilities"): [pct(float(p), 1) for p in probs]}))


@st.fragment
def neuron_tab(model, x, stages, hwc) -> None:
    """A fragment: a click on the map reruns this tab alone, not the whole page."""
    st.markdown(t("inside.neuron_intro"))
    a, b = st.columns(2)
    layer = a.radio(t("inside.layer"), list(I.CONV_LAYERS), horizontal=True, key=K + "layer")
    fmap_all = I.stage(stages, layer).values
    channels, h, w = fmap_all.shape
    if not 0 <= st.session_state.get(K + "channel", 0) < channels:   # conv2 had more maps
        st.session_state[K + "channel"] = 0
    channel = b.selectbox(t("inside.channel"), range(channels), key=K + "channel",
                          format_func=lambda i: t("inside.map_n", n=i + 1))
    # A click on the map sets the two boxes below, before they are drawn (they work alone too).
    event = st.session_state.get(K + "pick")
    points = (getattr(event, "selection", None) or {}).get("points", []) if event else []
    for p in points:
        x_, y_ = p.get("x"), p.get("y")
        if isinstance(x_, (int, float)) and isinstance(y_, (int, float)):
            pick = (int(y_), int(x_))
            if pick != st.session_state.get(K + "last_pick"):
                st.session_state[K + "row"], st.session_state[K + "col"] = pick
            st.session_state[K + "last_pick"] = pick
    for key, hi in ((K + "row", h), (K + "col", w)):
        value = st.session_state.get(key, hi // 2)
        st.session_state[key] = value if isinstance(value, int) and 0 <= value < hi else hi // 2
    left, right = st.columns([3, 2])
    row, col = st.session_state[K + "row"], st.session_state[K + "col"]
    fig = F.pick_figure(fmap_all[channel], row, col, t("inside.pick_title", layer=layer,
                                                        n=channel + 1, h=h, w=w),
                        f"{t('inside.col_row')}: %{{y}}<br>{t('inside.col_column')}: %{{x}}"
                        f"<br>{t('inside.col_value')}: %{{customdata}}")
    with left:
        st.plotly_chart(localize(fig), width="stretch", key=K + "pick", on_select="rerun",
                        selection_mode="points",
                        alt=t("inside.pick_alt", layer=layer, n=channel + 1, h=h, w=w))
    with right:
        st.caption(t("inside.pick_hint"))
        r = checked_number(st, t("inside.row", hi=h - 1), 0, h - 1, None, key=K + "row")
        c = checked_number(st, t("inside.col", hi=w - 1), 0, w - 1, None, key=K + "col")
    if r is None or c is None:
        return
    n = I.neuron(model, x, layer, int(channel), int(r), int(c), stages)
    k = n.kernel.shape[-1]
    with right:
        if layer == "conv1":
            chart(F.image_figure(hwc, t("inside.window_on_image"), (max(0, n.top),
                                 max(0, n.left), k), height=280), "window_image",
                  t("inside.window_alt", top=n.top, left=n.left, k=k))
        else:
            st.markdown(t("inside.conv2_source", c=n.window.shape[0], k=k))
    st.markdown(f"## {t('inside.arith_title', layer=layer, n=channel + 1, row=r, col=c)}")
    n_in = n.window.shape[0]
    ch_names = ([t("network.channel_name", c=ch) for ch in "RGB"] if layer == "conv1"
                else [t("inside.map_n", n=i + 1) for i in range(n_in)])
    fig = F.arithmetic_figure(n.window, n.kernel, n.products, ch_names,
                              (t("network.window"), t("network.kernel_word"),
                               t("network.products")))
    chart(fig, "arith", t("inside.arith_alt", c=n_in, k=k))
    if n_in > 6:
        st.caption(t("inside.first_channels", n=6, c=n_in))
    st.markdown(t("inside.arith_sum", n=n.products.size, c=n_in, k=k, total=num(n.total, 4),
                  bias=num(n.bias, 4), value=num(n.value, 4), relu=num(n.relu, 4)))
    if n.matches:
        st.success(t("inside.torch_agrees", value=num(n.torch_value, 4),
                     shown=num(float(fmap_all[channel, r, c]), 4)))
    else:
        st.error(t("inside.torch_differs", value=num(n.torch_value, 4)))
    with st.expander(t("a11y.show_table")):
        shown = slice(0, 6)   # the channels the figure draws (a wide net has hundreds)
        idx = np.indices(n.window[shown].shape).reshape(3, -1)
        st.dataframe(pd.DataFrame({
            t("inside.col_channel"): [ch_names[i] for i in idx[0]],
            t("inside.col_row"): idx[1], t("inside.col_column"): idx[2],
            t("network.window"): [num(v, 4) for v in n.window[shown].ravel()],
            t("network.kernel_word"): [num(v, 4) for v in n.kernel[shown].ravel()],
            t("network.products"): [num(v, 4) for v in n.products[shown].ravel()]}),
            hide_index=True)


def filters_tab(model, model_key: str, ckpt) -> None:
    st.markdown(t("inside.filters_intro"))
    after = model.conv1.weight
    c = after.shape[0]
    titles = [t("inside.map_n", n=i + 1) for i in range(c)]
    if ckpt is None:
        rows, before = [(t("inside.random_weights"), I.filter_patches(after))], None
        st.caption(t("inside.filters_random"))
    else:
        before = _initial_model(model_key, ckpt.config, len(ckpt.classes)).conv1.weight
        rows = [(t("inside.before"), I.filter_patches(before)),
                (t("inside.after"), I.filter_patches(after))]
        st.caption(t("inside.filters_seed", seed=ckpt.config.seed))
    chart(F.filters_figure(rows, titles), "filters", t("inside.filters_alt", n=c,
                                                       k=after.shape[-1]))
    if c > 8:
        st.caption(t("inside.first_filters", n=8, c=c))
    st.caption(t("inside.filters_scale"))
    with st.expander(t("a11y.show_table")):
        table = []
        for row in I.filter_table(before, after):
            item = {t("inside.col_filter"): row["kernel"], t("inside.col_red"): num(row["red"], 3),
                    t("inside.col_green"): num(row["green"], 3),
                    t("inside.col_blue"): num(row["blue"], 3),
                    t("inside.col_norm"): num(row["norm"], 3)}
            if "moved" in row:
                item[t("inside.col_norm_before")] = num(row["norm_before"], 3)
                item[t("inside.col_moved")] = num(row["moved"], 3)
            table.append(item)
        st.table(pd.DataFrame(table))


@st.fragment
def why_tab(model, model_key, image_key, x, hwc, stages, true_cls, names) -> None:
    """A fragment: choosing the class to compare with reruns this tab alone."""
    st.markdown(t("inside.why_intro"))
    probs = I.stage(stages, "softmax").values
    order = [int(i) for i in np.argsort(-probs, kind="stable")]
    predicted = order[0]
    default = true_cls if true_cls is not None and true_cls != predicted else order[1]
    other = st.selectbox(t("inside.compare_class"), range(len(names)), index=default,
                         key=K + "other_" + image_key, format_func=lambda i: names[i])
    targets = [(predicted, t("inside.predicted_row", name=names[predicted],
                             p=pct(float(probs[predicted]), 0)))]
    if other != predicted:
        key = "true_row" if other == true_cls else "other_row"
        targets.append((int(other), t(f"inside.{key}", name=names[other],
                                      p=pct(float(probs[other]), 0))))
    try:
        with st.spinner(t("inside.explaining")):
            views = {cls: _views(model_key, image_key, cls, model, x) for cls, _ in targets}
    except CifarLabError as err:
        show_error(err)
        return
    cells = [[(f"{label}<br>{t(f'inside.method_{m}')}", views[cls][m].heat, views[cls][m].signed)
              for m in I.METHODS] for cls, label in targets]
    chart(F.overlay_figure(hwc, cells), "why", t("inside.why_alt", n=len(targets)))
    seconds = [v.seconds for cls, _ in targets for v in views[cls].values()]
    st.caption(t("inside.why_legend") + " " + t("inside.why_times", lo=num(1000 * min(seconds), 0),
                                                   hi=num(1000 * max(seconds), 0)))
    with st.expander(t("a11y.show_table")):
        rows = []
        for cls, label in targets:
            for m in I.METHODS:
                top = I.strongest(views[cls][m].heat, 4, 3)
                rows.append({t("inside.col_class"): names[cls],
                             t("inside.col_method"): t(f"inside.method_{m}"),
                             t("inside.col_strongest"): "; ".join(
                                 t("inside.square", top=r0, left=c0, bottom=r0 + 3, right=c0 + 3)
                                 for r0, c0, _ in top)})
        st.table(pd.DataFrame(rows))
    for m in I.METHODS:
        st.markdown(f"**{t(f'inside.method_{m}')}**: {t(f'inside.explain_{m}')}")


# ------------------------------------------------------------------------------------ page

st.title(t("nav.inside"))
data = get_data()
chosen = choose_model(len(data.classes))
if chosen is not None and I.num_classes(chosen[0]) != len(data.classes):
    st.error(t("errors.checkpoint.other_classes", n=I.num_classes(chosen[0]),
               classes=len(data.classes)))
    chosen = None
picked = choose_image(chosen[0], chosen[1], data) if chosen is not None else None
names = [cls_name(c) for c in data.classes]
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
        probs = I.stage(stages, "softmax").values
        best = int(np.argmax(probs))
        st.markdown(t("inside.summary", image=words, predicted=names[best],
                      p=pct(float(probs[best]), 0))
                    + (" " + t("inside.summary_true", name=names[true_cls])
                       if true_cls is not None else ""))
tab_lesson, tab_act, tab_neuron, tab_filters, tab_why = st.tabs(
    [t("lesson.title"), t("inside.act_title"), t("inside.neuron_title"),
     t("inside.filters_title"), t("inside.why_title")], default=t("inside.act_title"))
with tab_lesson:
    lesson("inside")
if stages is not None:
    with tab_act:
        left, right = st.columns([1, 3])
        left.image(R.upscale(hwc, 5), width=160, caption=t("inside.as_seen"),
                   alt=t("inside.image_alt", image=words, predicted=names[best]))
        with right:
            activations_tab(stages, names)
    with tab_neuron:
        neuron_tab(model, x, stages, hwc)
    with tab_filters:
        filters_tab(model, model_key, ckpt)
    with tab_why:
        why_tab(model, model_key, image_key, x, hwc, stages, true_cls, names)
else:
    for tab in (tab_act, tab_neuron, tab_filters, tab_why):
        tab.info(t("inside.choose_first"))
