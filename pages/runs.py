"""Runs: this session's training runs side by side: loss curves overlaid, a sortable table of
configs, results and times with the knobs that differ highlighted, downloads (CIFAR Lab
checkpoint, the tutorial's cifar_net.pth, a script that repeats the run, and "Take your run
home": a zip of a notebook, the weights, TensorBoard logs and a model card) and delete."""
from __future__ import annotations

import math

import plotly.express as px
import streamlit as st

from cifarlab.serve import queue as jobs
from cifarlab.core.checkpoint import load as load_checkpoint
from cifarlab.core.config import knobs
from cifarlab.errors import CifarLabError
from cifarlab.lab import runs as R
from pages.common import lesson, localize, num, series_style, session_id, translator
from pages.common import queue as job_queue

t = translator()
K = "runs_"
DEFAULT_COMPARE = 3

# The result columns' labels; each knob column is labelled by its knob (the config's schema).
COLUMN_KEYS = {
    "run": "runs.run_col", "name": "runs.name_col", "status": "status.status",
    "started": "runs.created", "accuracy": "runs.accuracy_col", "final_loss": "runs.loss_col",
    "images_per_second": "common.images_per_second", "train_seconds": "runs.train_time_col",
    "steps": "common.step", "model": "runs.model_col",
} | {f.name: f.knob.label for f in knobs()}
HIGHLIGHT = "background-color: rgba(255, 200, 0, 0.35)"


def error_text(err: Exception) -> str:
    """An error in the student's language: ours from the catalogs, anything else in one line."""
    if isinstance(err, CifarLabError):
        return err.text(t.lang)
    return t("errors.unexpected_plain")   # details can hold server paths: never shown


def col_name(col: str) -> str:
    return t(COLUMN_KEYS[col])


def status_text(queue, run) -> str:
    if run.status == "queued":
        return t("status.queued", n=queue.queue_position(run.id) or 1)
    return t(f"status.{run.status}")


def short(run) -> str:
    return run.name or t("runs.run_name", id=run.id[:8])


@st.cache_data(max_entries=8, show_spinner=False)
def _losses(session: str, run_id: str, finished_at: float | None) -> tuple[list[int], list[float]]:
    return R.downsampled(*jobs.get_queue().losses(session, run_id))


@st.cache_data(max_entries=4, show_spinner=False)
def _plain_state_dict(session: str, run_id: str, mtime: float) -> bytes:
    ckpt = load_checkpoint(jobs.get_queue().checkpoint(session, run_id))
    return R.state_dict_bytes(ckpt)


def _checkpoint_reader(path):
    return lambda: path.read_bytes()


@st.cache_data(max_entries=4, show_spinner=False)
def _bundle(session: str, run_id: str, mtime: float, lang: str) -> bytes:
    queue = jobs.get_queue()
    ckpt = load_checkpoint(queue.checkpoint(session, run_id))
    steps, losses = queue.losses(session, run_id)
    return R.bundle_for_run(queue.get(session, run_id), ckpt, steps, losses, lang)


def _bundle_reader(session: str, run_id: str, mtime: float, lang: str):
    """Built when clicked (a deferred download), not at every rerun of the page."""
    return lambda: _bundle(session, run_id, mtime, lang)


def _rename(queue, sid: str, run_id: str) -> None:
    """The name field's callback: saved as typed (a blank name removes it)."""
    try:
        queue.rename(sid, run_id, st.session_state.get(K + "name_" + run_id))
        st.session_state[K + "flash"] = t("runs.renamed")
    except CifarLabError as err:
        st.session_state[K + "flash_error"] = error_text(err)


# ---------------------------------------------------------------------------------- sections

def table_section(queue, runs, selected: list[str]) -> None:
    df = R.runs_table(runs)
    chosen = df[df["run"].isin(selected)]
    differ = R.differing_columns(chosen)
    st.subheader(t("runs.table_title"))
    if len(chosen) >= 2:
        if differ:
            st.markdown(t("runs.differences", knobs=", ".join(f"**{col_name(c)}**"
                                                              for c in differ)))
        else:
            st.markdown(t("runs.no_differences"))
    shown = df.copy()
    shown["run"] = shown["run"].str[:8]
    shown["status"] = [status_text(queue, r) for r in runs]
    shown["train_subset"] = shown["train_subset"].map(
        lambda v: t("runs.all_images") if v is None or (isinstance(v, float) and math.isnan(v))
        else num(int(v)))
    shown["shuffle"] = shown["shuffle"].map(lambda v: t("common.yes") if v else t("common.no"))
    # the knobs that differ come right after the accuracy, where nobody has to scroll for them
    first = ["run", "name", "status", "started", "accuracy"]
    shown = shown[first + differ + [c for c in shown.columns if c not in first + differ]]
    names = {c: col_name(c) for c in shown.columns}
    style = shown.rename(columns=names).style.apply(
        lambda col: [HIGHLIGHT if (col.name in {names[d] for d in differ}
                                   and rid in set(selected)) else ""
                     for rid in df["run"]], axis=0)
    def fmt(digits=None):
        return lambda v: num(v, digits)

    style = style.format({names["accuracy"]: fmt(1), names["final_loss"]: fmt(3),
                          names["images_per_second"]: fmt(0), names["train_seconds"]: fmt(1),
                          names["steps"]: fmt(0), names["lr"]: fmt(), names["momentum"]: fmt(),
                          names["started"]: lambda d: d.strftime("%d/%m %H:%M")}, na_rep="–")
    st.dataframe(style, hide_index=True, key=K + "table")
    st.caption(t("runs.table_caption"))


def curves_section(runs, selected: list[str], sid: str) -> None:
    st.subheader(t("runs.loss_curves"))
    by_id = {r.id: r for r in runs}
    picked = [by_id[i] for i in selected if i in by_id]
    if not picked:
        st.info(t("runs.pick_some"))
        return
    x_axis = st.radio(t("runs.x_axis"), ["step", "epoch"], horizontal=True, key=K + "x",
                      format_func=lambda v: t(f"runs.x_{v}"))
    curves = {short(r): _losses(sid, r.id, r.finished_at) for r in picked}
    per_epoch = {short(r): R.steps_per_epoch(r) for r in picked}
    df = R.loss_curves(curves, per_epoch, x=x_axis)
    if df.empty:
        st.info(t("runs.no_losses"))
        return
    fig = px.line(df, x="x", y="loss", **series_style("run"),
                  labels={"x": t(f"runs.x_{x_axis}"), "loss": t("common.loss"),
                          "run": t("runs.run_col")})
    fig.update_layout(height=380, margin=dict(l=10, r=10, t=20, b=10),
                      legend=dict(orientation="h", y=-0.25))
    st.plotly_chart(localize(fig), width="stretch", key=K + "loss_chart")
    st.caption(t("runs.loss_caption"))


def actions_section(queue, runs, sid: str) -> None:
    st.subheader(t("runs.actions_title"))
    by_id = {r.id: r for r in runs}
    if st.session_state.get(K + "run") not in by_id:
        st.session_state.pop(K + "run", None)
    run_id = st.selectbox(t("runs.choose_run"), list(by_id), key=K + "run",
                          format_func=lambda rid: f"{short(by_id[rid])} · "
                                                  f"{status_text(queue, by_id[rid])}")
    run = by_id[run_id]
    path = queue.checkpoint(sid, run.id)   # the queue's checked path, never the browser's
    c1, c2, c3 = st.columns(3)
    has_ckpt = path.is_file()
    with c1:
        st.download_button(t("runs.download_checkpoint"),
                           _checkpoint_reader(path) if has_ckpt else b"",
                           file_name=f"cifarlab_{run.id[:8]}.pth",
                           mime="application/octet-stream", key=K + "dl_ckpt",
                           disabled=not has_ckpt, icon=":material/download:")
        st.caption(t("runs.checkpoint_caption"))
    with c2:
        plain = b""
        if has_ckpt:
            try:
                plain = _plain_state_dict(sid, run.id, path.stat().st_mtime)
            except (CifarLabError, OSError) as err:
                st.error(t("errors.checkpoint_bad", message=error_text(err)))
        st.download_button(t("runs.download_state_dict"), plain, file_name="cifar_net.pth",
                           mime="application/octet-stream", key=K + "dl_plain",
                           disabled=not plain, icon=":material/download:")
        cfg = R.config_of(run)
        st.caption(t("runs.state_dict_caption") if cfg is None or cfg.model.is_tutorial
                   else t("runs.state_dict_caption_custom"))
    with c3:
        script = ""
        cfg = R.config_of(run)
        if cfg is not None:
            try:
                from cifarlab.core.export import export_script

                acc = (run.result or {}).get("test_accuracy")
                note = f"CIFAR Lab run {run.id}" + (f", test accuracy {100 * acc:.1f} %"
                                                    if isinstance(acc, (int, float)) else "")
                script = export_script(cfg, source_note=note,
                                       script_name=f"cifar_run_{run.id[:8]}.py")
            except (ImportError, CifarLabError) as err:
                st.caption(t("runs.script_unavailable", reason=error_text(err)[:300]))
        st.download_button(t("runs.download_script"), script, file_name=f"cifar_run_{run.id[:8]}.py",
                           mime="text/x-python", key=K + "dl_script", disabled=not script,
                           icon=":material/code:")
        st.caption(t("runs.script_caption"))
    ready = has_ckpt and run.finished and R.config_of(run) is not None
    st.download_button(t("bundle.download"),
                       _bundle_reader(sid, run.id, path.stat().st_mtime, t.lang) if ready else b"",
                       file_name=R.bundle_file_name(run), mime="application/zip",
                       key=K + "dl_bundle", disabled=not ready, type="primary",
                       icon=":material/home:")
    st.caption(t("bundle.download_caption"))
    if not has_ckpt:
        st.caption(t("runs.no_checkpoint"))
    if run.error:
        st.warning(t("runs.run_error", error=run.error_text(t.lang)))

    own = queue.can_control(sid, run)
    if not own:
        st.caption(t("runs.not_yours"))
        return
    st.text_input(t("runs.rename"), value=run.name or "", key=K + "name_" + run.id,
                  max_chars=100, help=t("runs.rename_help"), on_change=_rename,
                  args=(queue, sid, run.id))
    if run.active:
        st.caption(t("runs.active_no_delete"))
    if st.button(t("runs.delete"), key=K + "delete", disabled=run.active,
                 icon=":material/delete:"):
        st.session_state[K + "confirm"] = run.id
    if st.session_state.get(K + "confirm") == run.id:
        st.warning(t("runs.delete_confirm", name=short(run)))
        y, n = st.columns(2)
        if y.button(t("runs.delete_yes"), key=K + "delete_yes", type="primary"):
            st.session_state.pop(K + "confirm", None)
            try:
                queue.delete(sid, run.id)
            except CifarLabError as err:
                st.error(error_text(err))
                return
            st.session_state[K + "flash"] = t("runs.deleted")
            st.session_state.pop(K + "run", None)
            st.rerun()
        if n.button(t("common.cancel"), key=K + "delete_no"):
            st.session_state.pop(K + "confirm", None)
            st.rerun()


# ------------------------------------------------------------------------------------ page

st.title(t("nav.runs"))
tab_lesson, tab_runs = st.tabs([t("lesson.title"), t("runs.title")], default=t("runs.title"))
with tab_lesson:
    lesson("runs")

with tab_runs:
    sid = session_id()
    if K + "flash" in st.session_state:
        st.success(st.session_state.pop(K + "flash"), icon=":material/check:")
    if K + "flash_error" in st.session_state:
        st.error(st.session_state.pop(K + "flash_error"))
    queue = job_queue()
    try:
        all_runs = queue.runs(sid, kind="train")
    except CifarLabError as err:
        st.error(error_text(err))
        all_runs = None
    if all_runs is not None and not all_runs:
        st.info(t("runs.no_runs"), icon=":material/info:")
        st.page_link("pages/train.py", label=t("runs.go_train"), icon=":material/model_training:")
    elif all_runs:
        if queue.settings.shared_view:
            st.caption(t("runs.shared_view"))
        ids = [r.id for r in all_runs]
        by_id = {r.id: r for r in all_runs}
        if K + "compare" not in st.session_state:
            finished = [r.id for r in all_runs if r.finished and r.status != "failed"]
            st.session_state[K + "compare"] = finished[:DEFAULT_COMPARE]
        st.session_state[K + "compare"] = [i for i in st.session_state[K + "compare"]
                                           if i in by_id]
        selected = st.multiselect(t("runs.select_runs"), ids, key=K + "compare",
                                  help=t("runs.compare_help"),
                                  format_func=lambda rid: short(by_id[rid]))
        curves_section(all_runs, selected, sid)
        table_section(queue, all_runs, selected)
        st.divider()
        actions_section(queue, all_runs, sid)
