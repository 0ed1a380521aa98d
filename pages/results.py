"""Results: one finished run (or an uploaded checkpoint): accuracy overall and per class beside
the tutorial's figures, the confusion matrix (choose a cell to see those test images), per-class
accuracy per epoch, sample predictions, and a student's own picture classified."""
from __future__ import annotations

import hashlib
from datetime import datetime

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from cifarlab.serve import queue as jobs
from cifarlab.lab import results as R
from cifarlab.lab import tables
from cifarlab.core.config import CIFAR10_CLASSES
from cifarlab.errors import CifarLabError
from cifarlab.serve.queue import FINISHED
from pages.common import get_data, lesson, localize, num, session_id, translator
from pages.common import queue as job_queue

t = translator()
K = "results_"
N_CONFUSED = 24
N_SAMPLES = 16


def cls_name(name: str) -> str:
    return t(f"classes.{name}") if name in CIFAR10_CLASSES else name


def pct(x: float, digits: int = 1) -> str:
    """A fraction as a percentage's number, in the page's language ("55,3" in Spanish)."""
    return num(100 * x, digits)


def error_text(err: Exception) -> str:
    """An error in the student's language: ours from the catalogs, anything else in one line."""
    if isinstance(err, CifarLabError):
        return err.text(t.lang)
    return t("errors.unexpected_plain")   # details can hold server paths: never shown


def show_err(err: Exception, **kw) -> None:
    st.error(error_text(err), **kw)


# ------------------------------------------------------------------------- cached model work

@st.cache_resource(max_entries=4, show_spinner=False)
def _run_model(session: str, run_id: str, mtime: float):
    queue = jobs.get_queue()  # made by the page already (job_queue() below)
    return R.load_run_model(queue.checkpoint(session, run_id))


@st.cache_resource(max_entries=2, show_spinner=False)
def _uploaded_model(digest: str, _data: bytes, name: str):
    return R.load_uploaded_checkpoint(_data, name)


@st.cache_data(max_entries=4, show_spinner=False)
def _predictions(model_key: str, data_key: str, _model, _data, tta: bool = False):
    return R.predictions_for(_model, _data, tta=tta)


@st.cache_data(max_entries=8, show_spinner=False)
def _per_class_by_epoch(session: str, run_id: str, finished_at: float | None) -> pd.DataFrame:
    return R.per_class_by_epoch(jobs.get_queue().events(session, run_id, kinds=["epoch"]))


def run_label(run, sid: str) -> str:
    when = datetime.fromtimestamp(run.started_at or run.created_at).strftime("%d/%m %H:%M")
    acc = (run.result or {}).get("test_accuracy")
    text = t("results.run_option", id=run.id[:8], when=when,
             acc=pct(acc) if isinstance(acc, (int, float)) else "–")
    if run.name:
        text = f"{run.name} · {text}"
    if run.status != "done":
        text += f" · {t(f'status.{run.status}')}"
    if run.session != sid:
        text += " · " + t("results.classmate_run")
    return text


# ------------------------------------------------------------------------------- the model

def choose_model():
    """(model, checkpoint, key, run or None) chosen by the student, or None (page stops)."""
    sid = session_id()
    source = st.radio(t("results.source"), ["run", "upload"], horizontal=True, key=K + "source",
                      format_func=lambda s: t(f"results.source_{s}"))
    if source == "upload":
        # the uploader lets a file a little over our limit through: our message refuses it
        up = st.file_uploader(t("results.upload_checkpoint"), key=K + "ckpt",
                              help=t("results.upload_checkpoint_help"),
                              max_upload_size=R.UPLOADER_MB)
        if up is None:
            st.info(t("results.upload_checkpoint_hint"))
            return None
        blob = up.getvalue()
        digest = hashlib.sha256(blob).hexdigest()
        try:
            model, ckpt = _uploaded_model(digest, blob, up.name)
        except CifarLabError as err:
            st.error(t("errors.checkpoint_bad", message=error_text(err)))
            return None
        if ckpt.plain:
            st.caption(t("results.plain_state_dict"))
        return model, ckpt, "upload-" + digest, None

    queue = job_queue()
    try:
        runs = [r for r in queue.runs(sid, statuses=FINISHED, kind="train")
                if queue.checkpoint(sid, r.id).is_file()]
    except CifarLabError as err:
        show_err(err)
        return None
    if not runs:
        st.info(t("results.no_runs"), icon=":material/info:")
        st.page_link("pages/train.py", label=t("results.go_train"),
                     icon=":material/model_training:")
        return None
    ids = [r.id for r in runs]
    by_id = {r.id: r for r in runs}
    wanted = st.query_params.get("run")
    if wanted in by_id and K + "run" not in st.session_state:
        st.session_state[K + "run"] = wanted
    if st.session_state.get(K + "run") not in by_id:
        st.session_state.pop(K + "run", None)
    labels = {rid: run_label(run, sid) for rid, run in by_id.items()}   # in this run's language
    run_id = st.selectbox(t("results.choose_run"), ids, key=K + "run", format_func=labels.get)
    run = by_id[run_id]
    path = queue.checkpoint(sid, run.id)
    try:
        with st.spinner(t("results.loading_model")):
            model, ckpt = _run_model(sid, run.id, path.stat().st_mtime)
    except (CifarLabError, OSError) as err:
        st.error(t("errors.checkpoint_bad", message=error_text(err)))
        return None
    if run.status != "done":
        st.caption(t("results.partial_run", status=t(f"status.{run.status}")))
    return model, ckpt, f"run-{run.id}-{path.stat().st_mtime}", run


# --------------------------------------------------------------------------------- figures

def accuracy_section(ev) -> None:
    ref = R.TUTORIAL_REFERENCE
    c1, c2 = st.columns([1, 2])
    with c1:
        st.metric(t("results.overall_accuracy"), f"{pct(ev.accuracy)} %",
                  delta=f"{pct(ev.accuracy - ref['accuracy'])} pp",
                  help=t("results.delta_help", pct=pct(ref["accuracy"], 0)))
        st.caption(t("results.overall_accuracy_value", pct=pct(ev.accuracy),
                     n=f"{ev.total:,}", correct=f"{ev.correct:,}"))
        bars = go.Figure(go.Bar(
            x=[t("results.this_model"), t("results.tutorial_bar"), t("results.chance_bar")],
            y=[100 * ev.accuracy, 100 * ref["accuracy"], 100 * ref["chance"]],
            marker_color=["#1f77b4", "#9aa5b1", "#d0d5db"],
            text=[f"{pct(ev.accuracy)} %", f"{pct(ref['accuracy'], 0)} %",
                  f"{pct(ref['chance'], 0)} %"], textposition="outside"))
        bars.update_layout(height=300, margin=dict(l=10, r=10, t=20, b=10),
                           yaxis_title=t("common.accuracy") + " (%)", yaxis_range=[0, 105])
        st.plotly_chart(localize(bars), width="stretch", key=K + "overall_chart")
    with c2:
        st.subheader(t("results.per_class_accuracy"))
        names = [cls_name(c) for c in ev.classes]
        fig = go.Figure(go.Bar(
            x=names, y=[100 * ev.per_class_accuracy[c] for c in ev.classes],
            name=t("results.this_model"), marker_color="#1f77b4",
            text=[f"{pct(ev.per_class_accuracy[c], 0)}" for c in ev.classes],
            textposition="outside"))
        ranges = {c: r for c, r in ref["per_class_ranges"].items() if c in ev.classes}
        if ranges:
            lo = np.array([r[0] for r in ranges.values()])
            hi = np.array([r[1] for r in ranges.values()])
            fig.add_trace(go.Scatter(
                x=[cls_name(c) for c in ranges], y=100 * (lo + hi) / 2, mode="markers",
                name=t("results.tutorial_range"), marker=dict(color="#e4572e", size=9,
                                                               symbol="line-ew-open"),
                error_y=dict(type="data", array=100 * (hi - lo) / 2, color="#e4572e",
                             thickness=3, width=10)))
        fig.add_hline(y=100 * ref["accuracy"], line_dash="dash", line_color="#9aa5b1",
                      annotation_text=t("results.tutorial_figure", pct=pct(ref["accuracy"], 0)),
                      annotation_position="top left")
        fig.update_layout(height=340, margin=dict(l=10, r=10, t=20, b=10),
                          yaxis_title=t("common.accuracy") + " (%)", yaxis_range=[0, 105],
                          legend=dict(orientation="h", y=-0.2))
        st.plotly_chart(localize(fig), width="stretch", key=K + "per_class_chart")
        with st.expander(t("a11y.show_table")):   # the chart's numbers, for screen readers
            st.dataframe(tables.per_class_table(
                {c: ev.per_class_accuracy[c] for c in ev.classes}, t.lang,
                reference=ref.get("per_class_ranges")), hide_index=True)
        st.caption(t("results.per_class_swings"))


def epochs_section(run, ckpt) -> None:
    st.subheader(t("results.per_epoch_title"))
    if run is not None:
        df = _per_class_by_epoch(session_id(), run.id, run.finished_at)
    else:
        df = R.per_class_by_epoch((ckpt.results or {}).get("epochs") or [])
    if df.empty:
        st.info(t("results.per_epoch_none"))
        return
    df = df.assign(accuracy=100 * df["accuracy"], cls=df["class"].map(cls_name))
    fig = px.line(df, x="epoch", y="accuracy", color="cls", markers=True,
                  labels={"epoch": t("common.epoch"), "accuracy": t("common.accuracy") + " (%)",
                          "cls": t("common.class")})
    fig.update_layout(height=360, margin=dict(l=10, r=10, t=20, b=10), yaxis_range=[0, 100])
    fig.update_xaxes(dtick=1)
    st.plotly_chart(localize(fig), width="stretch", key=K + "epoch_chart")
    with st.expander(t("a11y.show_table")):
        st.dataframe(tables.per_class_by_epoch_table(df.drop(columns=["cls"]).assign(
            accuracy=df["accuracy"] / 100), t.lang), hide_index=True)
    st.caption(t("results.per_epoch_caption"))


def confusion_section(ev, data) -> None:
    st.subheader(t("results.confusion_matrix"))
    st.caption(t("results.confusion_caption"))
    k = len(ev.classes)
    names = [cls_name(c) for c in ev.classes]
    m = np.array(ev.confusion, dtype=float)
    hide_diag = st.toggle(t("results.mistakes_only"), key=K + "mistakes_only",
                          help=t("results.mistakes_only_help"))
    z = m.copy()
    if hide_diag:
        np.fill_diagonal(z, np.nan)
    ii, jj = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
    fig = go.Figure(go.Heatmap(
        z=z, x=names, y=names, colorscale="Blues", text=m.astype(int), texttemplate="%{text}",
        hoverinfo="skip", showscale=False))
    # An almost invisible marker on every cell: heatmaps cannot be selected, markers can.
    fig.add_trace(go.Scatter(
        x=[names[j] for j in jj.ravel()], y=[names[i] for i in ii.ravel()], mode="markers",
        marker=dict(symbol="square", size=34, color="rgba(0,0,0,0.01)"),
        customdata=np.stack([ii.ravel(), jj.ravel(), m.ravel()], axis=1),
        hovertemplate=(t("results.true_label") + ": %{y}<br>" + t("results.predicted_label")
                       + ": %{x}<br>" + t("results.count") + ": %{customdata[2]}<extra></extra>"),
        showlegend=False))
    fig.update_layout(height=560, margin=dict(l=10, r=10, t=10, b=10), clickmode="event+select",
                      xaxis_title=t("results.predicted_label"), yaxis_title=t("results.true_label"))
    fig.update_yaxes(autorange="reversed")
    event = st.plotly_chart(localize(fig), width="stretch", key=K + "cm", on_select="rerun",
                            selection_mode="points")
    with st.expander(t("a11y.show_table")):   # the matrix's counts, for screen readers
        st.dataframe(tables.confusion_table(ev.confusion, ev.classes, t.lang))

    # The chart's selection drives the two boxes below (and they work on their own too).
    if K + "true" not in st.session_state:
        st.session_state[K + "true"], st.session_state[K + "pred"] = \
            R.most_confused_pair(ev.confusion)
    selection = getattr(event, "selection", None) or {}
    points = selection.get("points", []) if hasattr(selection, "get") else []
    picked = None
    for p in points:
        picked = R.picked_cell(p, names) or picked
    if picked is not None and picked != st.session_state.get(K + "last_pick"):
        st.session_state[K + "true"], st.session_state[K + "pred"] = picked
    st.session_state[K + "last_pick"] = picked
    for key in (K + "true", K + "pred"):
        if not 0 <= int(st.session_state[key]) < k:
            st.session_state[key] = 0
    st.caption(t("results.pick_hint"))
    c1, c2 = st.columns(2)
    true_i = c1.selectbox(t("results.filter_true"), list(range(k)), key=K + "true",
                          format_func=lambda i: names[i])
    pred_i = c2.selectbox(t("results.filter_predicted"), list(range(k)), key=K + "pred",
                          format_func=lambda i: names[i])
    n_cell = int(m[true_i, pred_i])
    idx = R.confused_examples(ev, true_i, pred_i, limit=N_CONFUSED)
    key = "pair_correct" if true_i == pred_i else "pair_count"
    st.markdown(t(f"results.{key}", n=n_cell, true=names[true_i], predicted=names[pred_i],
                  shown=len(idx)))
    if len(idx):
        sure = [pct(float(ev.probabilities[i, pred_i]), 0) for i in idx]
        st.image([R.upscale(data.test_x[i], 3) for i in idx], caption=sure, width=96,
                 alt=[t("results.image_alt", i=int(i), true=names[true_i],
                        predicted=names[pred_i], p=p) for i, p in zip(idx, sure)])


def samples_section(ev, data) -> None:
    st.subheader(t("results.samples_title"))
    if st.button(t("results.new_sample"), key=K + "resample", icon=":material/shuffle:"):
        st.session_state[K + "seed"] = st.session_state.get(K + "seed", 0) + 1
    df = R.sample_predictions(ev, N_SAMPLES, seed=st.session_state.get(K + "seed", 0))
    st.caption(t("results.samples_caption", right=int(df["correct"].sum()), n=len(df)))
    captions = [t("results.sample_caption", mark="✓" if row.correct else "✗",
                  true=cls_name(row.true), predicted=cls_name(row.predicted),
                  p=pct(row.confidence, 0)) for row in df.itertuples(index=False)]
    alts = [t("results.image_alt", i=int(row.index), true=cls_name(row.true),
              predicted=cls_name(row.predicted), p=pct(row.confidence, 0))
            for row in df.itertuples(index=False)]
    st.image([R.upscale(data.test_x[i], 4) for i in df["index"]], caption=captions, width=112,
             alt=alts)


def own_image_section(model, ckpt) -> None:
    st.subheader(t("results.own_image_title"))
    st.caption(t("results.tiny_note"))
    up = st.file_uploader(t("results.upload_image"), key=K + "image", help=t("results.upload_help"),
                          max_upload_size=R.UPLOADER_MB)
    if up is None:
        return
    try:
        prepared = R.prepare_image(up.getvalue())
        ranked = R.classify_prepared(model, prepared, ckpt.classes)
    except R.ImageError as err:
        show_err(err, icon=":material/broken_image:")
        return
    except CifarLabError as err:
        show_err(err)
        return
    for code, params in prepared.notes:
        st.caption(t(f"results.note_{code}", **params))
    c1, c2, c3 = st.columns([1, 1, 2])
    c1.image(prepared.preview, caption=t("results.your_image"), width=160)
    c2.image(R.upscale(prepared.pixels, 5), caption=t("results.as_the_network_sees_it"),
             width=160)
    best, p = ranked[0]
    with c3:
        st.markdown("#### " + t("results.prediction", name=cls_name(best), p=pct(p, 0)))
        top = ranked[:5][::-1]
        fig = go.Figure(go.Bar(x=[100 * q for _, q in top], y=[cls_name(c) for c, _ in top],
                               orientation="h", text=[f"{pct(q, 1)} %" for _, q in top],
                               textposition="outside", marker_color="#1f77b4"))
        fig.update_layout(height=240, margin=dict(l=10, r=30, t=30, b=10),
                          title=t("results.top_guesses"), xaxis_range=[0, 110],
                          xaxis_title=t("results.probability"))
        st.plotly_chart(localize(fig), width="stretch", key=K + "guess_chart")
        st.caption(t("results.ten_classes_only"))


# ------------------------------------------------------------------------------------ page

st.title(t("nav.results"))
tab_lesson, tab_results = st.tabs([t("lesson.title"), t("results.title")],
                                  default=t("results.title"))
with tab_lesson:
    lesson("results")

with tab_results:
    chosen = choose_model()
    if chosen is not None:
        model, ckpt, model_key, run = chosen
        data = get_data()
        try:
            with st.spinner(t("results.evaluating")):
                # a run that tested with mirrored images is shown as it measured itself
                tta = bool(getattr(getattr(ckpt, "config", None), "tta", False))
                ev = _predictions(model_key, data.key, model, data, tta)
        except CifarLabError as err:
            show_err(err)
            st.stop()
        accuracy_section(ev)
        st.divider()
        confusion_section(ev, data)
        st.divider()
        epochs_section(run, ckpt)
        st.divider()
        samples_section(ev, data)
        st.divider()
        own_image_section(model, ckpt)
