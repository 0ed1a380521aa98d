"""A finished run's model for Results and Inside, its predictions, an uploaded picture."""
from __future__ import annotations

import hashlib

import streamlit as st

from cifarlab.errors import CifarLabError
from cifarlab.lab import inside, results as R
from cifarlab.lab.results.figures import run_label
from cifarlab.serve.queue import FINISHED, get_queue
from ui.data import queue
from ui.language import call_or_show, error_text, show_error, t, translator
from ui.session import session_id


@st.cache_resource(max_entries=4, show_spinner=False)
def _run_model(session: str, run_id: str, mtime: float):
    return R.load_run_model(get_queue().checkpoint(session, run_id))


@st.cache_resource(max_entries=2, show_spinner=False)
def random_model(classes: int):
    return inside.random_model(0, classes=classes)   # the untrained Net to compare with


@st.cache_data(max_entries=4, show_spinner=False)
def predictions(model_key: str, data_key: str, _model, _data, tta: bool = False):
    return R.predictions_for(_model, _data, tta=tta)


def finished_runs() -> list | None:
    """This session's finished runs with a checkpoint (None: the reason shown)."""
    sid, jobs = session_id(), queue()
    return call_or_show(lambda: [r for r in jobs.runs(sid, statuses=FINISHED, kind="train")
                                 if jobs.checkpoint(sid, r.id).is_file()])


def pick_run_model(where, runs: list, key: str):
    """(model, checkpoint, model key, run) picked, or None."""
    if not runs:
        where.info(t("results.no_runs"), icon=":material/info:")
        where.page_link("pages/train.py", label=t("results.go_train"),
                        icon=":material/model_training:")
        return None
    sid, by_id = session_id(), {r.id: r for r in runs}
    if st.session_state.get(key) not in by_id:
        st.session_state.pop(key, None)
    labels = {rid: run_label(run, sid, translator()) for rid, run in by_id.items()}
    run_id = where.selectbox(t("results.choose_run"), list(by_id), key=key, format_func=labels.get)
    path = queue().checkpoint(sid, run_id)
    try:
        with st.spinner(t("results.loading_model")):
            model, ckpt = _run_model(sid, run_id, path.stat().st_mtime)
    except (CifarLabError, OSError) as err:
        st.error(t("errors.checkpoint_bad", message=error_text(err)))
        return None
    return model, ckpt, f"run-{run_id}-{path.stat().st_mtime}", by_id[run_id]


def uploaded_picture(where, key: str, hint: str | None = None):
    """(the prepared picture, the file's digest), or None with ``hint`` or the reason."""
    up = where.file_uploader(t("results.upload_image"), key=key, help=t("results.upload_help"),
                             max_upload_size=R.UPLOADER_MB)
    if up is None:
        if hint:
            where.info(hint)
        return None
    try:
        prepared = R.prepare_image(up.getvalue())
    except CifarLabError as err:
        show_error(err, **({"icon": ":material/broken_image:"}
                           if isinstance(err, R.ImageError) else {}))
        return None
    for code, params in prepared.notes:
        where.caption(t(f"results.note_{code}", **params))
    return prepared, hashlib.sha256(up.getvalue()).hexdigest()[:16]
