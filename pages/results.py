"""Results: accuracy, the confusion matrix, per-class accuracy per epoch, samples, uploads."""
from __future__ import annotations

import hashlib

import streamlit as st

from cifarlab.errors import CifarLabError
from cifarlab.lab import results as R, tables
from cifarlab.lab.data import upscale
from cifarlab.lab.results import figures as F
from cifarlab.lab.tables import class_name
from cifarlab.serve.queue import get_queue
from ui.data import get_data
from ui.language import call_or_show, error_text, pct, show_error, translator
from ui.models import finished_runs, pick_run_model, predictions, uploaded_picture
from ui.nav import lesson
from ui.session import session_id
from ui.widgets import clicked_points

t = translator()
K = "results_"


def pct_number(x: float, digits: int = 1) -> str:
    """A fraction as a percentage's number alone ("13,2"): the text around it says %."""
    return F.pct(x, t.lang, digits)


def cls_name(name: str) -> str:
    return class_name(name, t.lang)


@st.cache_resource(max_entries=2, show_spinner=False)
def _uploaded_model(digest: str, _data: bytes, name: str):
    return R.load_uploaded_checkpoint(_data, name)


@st.cache_data(max_entries=8, show_spinner=False)
def _per_class_by_epoch(session: str, run_id: str, finished_at: float | None):
    return R.per_class_by_epoch(get_queue().events(session, run_id, kinds=["epoch"]))


def choose_model():
    """(model, checkpoint, key, run or None) chosen by the student, or None."""
    source = st.radio(t("results.source"), ["run", "upload"], horizontal=True, key=K + "source",
                      format_func=lambda s: t(f"results.source_{s}"))
    if source == "run":
        runs = finished_runs()
        chosen = None if runs is None else pick_run_model(st, runs, K + "run")
        if chosen is not None and chosen[3].status != "done":
            st.caption(t("results.partial_run", status=t(f"status.{chosen[3].status}")))
        return chosen
    # the uploader lets a file a little over our limit through: our message refuses it
    up = st.file_uploader(t("results.upload_checkpoint"), key=K + "ckpt",
                          help=t("results.upload_checkpoint_help"), max_upload_size=R.UPLOADER_MB)
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


def accuracy_section(ev) -> None:
    ref = R.TUTORIAL_REFERENCE
    c1, c2 = st.columns([1, 2])
    c1.metric(t("results.overall_accuracy"), f"{pct_number(ev.accuracy)} %",
              delta=f"{pct_number(ev.accuracy - ref['accuracy'])} pp",
              help=t("results.delta_help", pct=pct_number(ref["accuracy"], 0)))
    c1.caption(t("results.overall_accuracy_value", n=int(ev.total), correct=int(ev.correct)))
    c2.subheader(t("results.per_class_accuracy"))
    c2.plotly_chart(F.accuracy_figure(ev.per_class_accuracy, t), key=K + "per_class_chart",
                    alt=t("a11y.per_class_chart"))
    c2.expander(t("a11y.show_table")).dataframe(tables.per_class_table(
        [(c, ev.per_class_accuracy[c]) for c in ev.classes], t.lang,
        reference=ref.get("per_class_ranges")), hide_index=True)
    c2.caption(t("results.per_class_swings"))


def epochs_section(run, ckpt) -> None:
    st.subheader(t("results.per_epoch_title"))
    df = (_per_class_by_epoch(session_id(), run.id, run.finished_at) if run is not None
          else R.per_class_by_epoch((ckpt.results or {}).get("epochs") or []))
    if df.empty:
        st.info(t("results.per_epoch_none"))
        return
    st.plotly_chart(F.epochs_figure(df, t), key=K + "epoch_chart", alt=t("a11y.epochs_chart"))
    with st.expander(t("a11y.show_table")):
        st.dataframe(tables.per_class_by_epoch_table(df, t.lang), hide_index=True)
    st.caption(t("results.per_epoch_caption"))


def confusion_section(ev, data) -> None:
    st.subheader(t("results.confusion_matrix"))
    st.caption(t("results.confusion_caption"))
    k, names = len(ev.classes), [cls_name(c) for c in ev.classes]
    hide_diag = st.toggle(t("results.mistakes_only"), key=K + "mistakes_only",
                          help=t("results.mistakes_only_help"))
    event = st.plotly_chart(F.confusion_figure(ev, hide_diag, t), key=K + "cm",
                            on_select="rerun", selection_mode="points",
                            alt=t("a11y.confusion_chart"))
    with st.expander(t("a11y.show_table")):
        st.dataframe(tables.confusion_table(ev.confusion, ev.classes, t.lang))

    # a click on the chart sets the two boxes below (they work alone too)
    ss = st.session_state
    if K + "true" not in ss:
        ss[K + "true"], ss[K + "pred"] = R.most_confused_pair(ev.confusion)
    picked = None
    for p in clicked_points(event):
        picked = R.picked_cell(p, names) or picked
    if picked is not None and picked != ss.get(K + "last_pick"):
        ss[K + "true"], ss[K + "pred"] = picked
    ss[K + "last_pick"] = picked
    st.caption(t("results.pick_hint"))
    c1, c2 = st.columns(2)
    true_i = c1.selectbox(t("results.filter_true"), list(range(k)), key=K + "true",
                          format_func=lambda i: names[i])
    pred_i = c2.selectbox(t("results.filter_predicted"), list(range(k)), key=K + "pred",
                          format_func=lambda i: names[i])
    idx = R.confused_examples(ev, true_i, pred_i, limit=24)
    key = "pair_correct" if true_i == pred_i else "pair_count"
    st.markdown(t(f"results.{key}", n=int(ev.confusion[true_i][pred_i]), true=names[true_i],
                  predicted=names[pred_i], shown=len(idx)))
    if len(idx):
        sure = [pct(float(ev.probabilities[i, pred_i]), 0) for i in idx]
        st.image([upscale(data.test_x[i], 3) for i in idx], caption=sure, width=96,
                 alt=[t("results.image_alt", i=int(i), true=names[true_i],
                        predicted=names[pred_i], p=p) for i, p in zip(idx, sure)])


def samples_section(ev, data) -> None:
    st.subheader(t("results.samples_title"))
    if st.button(t("results.new_sample"), key=K + "resample", icon=":material/shuffle:"):
        st.session_state[K + "seed"] = st.session_state.get(K + "seed", 0) + 1
    df = R.sample_predictions(ev, 16, seed=st.session_state.get(K + "seed", 0))
    st.caption(t("results.samples_caption", right=int(df["correct"].sum()), n=len(df)))
    rows = [dict(i=int(r.index), true=cls_name(r.true), predicted=cls_name(r.predicted),
                 p=pct(r.confidence, 0), mark="✓" if r.correct else "✗")
            for r in df.itertuples(index=False)]
    st.image([upscale(data.test_x[i], 4) for i in df["index"]], width=112,
             caption=[t("results.sample_caption", **r) for r in rows],
             alt=[t("results.image_alt", **r) for r in rows])


def own_image_section(model, ckpt) -> None:
    st.subheader(t("results.own_image_title"))
    st.caption(t("results.tiny_note"))
    got = uploaded_picture(st, K + "image")
    if got is None:
        return
    prepared = got[0]
    ranked = call_or_show(R.classify_prepared, model, prepared, ckpt.classes)
    if ranked is None:
        return
    c1, c2, c3 = st.columns([1, 1, 2])
    c1.image(prepared.preview, caption=t("results.your_image"), width=160)
    c2.image(upscale(prepared.pixels, 5), caption=t("results.as_the_network_sees_it"), width=160)
    best, p = ranked[0]
    c3.markdown("#### " + t("results.prediction", name=cls_name(best), p=pct_number(p, 0)))
    c3.plotly_chart(F.guesses_figure(ranked, t), key=K + "guess_chart",
                    alt=t("a11y.guesses_chart"))
    c3.caption(t("results.ten_classes_only"))


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
                ev = predictions(model_key, data.key, model, data, ckpt.config.tta)
        except CifarLabError as err:
            show_error(err)
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
