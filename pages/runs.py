"""Runs: this session's runs side by side, each one's downloads, rename and delete."""
from __future__ import annotations

import streamlit as st

from cifarlab.core.checkpoint import load as load_checkpoint
from cifarlab.errors import CifarLabError
from cifarlab.lab import runs as R
from cifarlab.lab.train_live import status_text
from cifarlab.serve.queue import get_queue
from ui import messages
from ui.data import queue as job_queue
from ui.language import call_or_show, error_text, translator
from ui.nav import lesson
from ui.session import session_id

t = translator()
K = "runs_"


def short(run) -> str:
    return run.name or t("runs.run_name", id=run.id[:8])


@st.cache_data(max_entries=8, show_spinner=False)
def _losses(session: str, run_id: str, finished_at: float | None) -> tuple[list[int], list[float]]:
    return R.downsampled(*get_queue().losses(session, run_id))


@st.cache_data(max_entries=4, show_spinner=False)
def _plain_state_dict(session: str, run_id: str, mtime: float) -> bytes:
    return R.state_dict_bytes(load_checkpoint(get_queue().checkpoint(session, run_id)))


@st.cache_data(max_entries=4, show_spinner=False)
def _bundle(session: str, run_id: str, mtime: float, lang: str) -> bytes:
    queue = get_queue()
    ckpt = load_checkpoint(queue.checkpoint(session, run_id))
    steps, losses = queue.losses(session, run_id)
    return R.bundle_for_run(queue.get(session, run_id), ckpt, steps, losses, lang)


def _rename(queue, sid: str, run_id: str) -> None:
    """Saved as typed (a blank name removes it)."""
    try:
        queue.rename(sid, run_id, st.session_state.get(K + "name_" + run_id))
        messages.keep(K + "flash", "success", t("runs.renamed"))
    except CifarLabError as err:
        messages.keep(K + "flash", "error", err)


def table_section(queue, runs, selected: list[str]) -> None:
    df = R.runs_table(runs)
    st.subheader(t("runs.table_title"))
    if len(selected) >= 2:
        differ = R.differing_columns(df[df["run"].isin(selected)])
        st.markdown(t("runs.differences", knobs=", ".join(
            f"**{t(R.COLUMN_KEYS[c])}**" for c in differ)) if differ
            else t("runs.no_differences"))
    statuses = [status_text(r, r.status == "queued" and queue.queue_position(r.id), t.lang)
                for r in runs]
    st.dataframe(R.compare_table(df, selected, statuses, t), hide_index=True, key=K + "table")
    st.caption(t("runs.table_caption"))


def curves_section(by_id: dict, selected: list[str], sid: str) -> None:
    st.subheader(t("runs.loss_curves"))
    picked = [by_id[i] for i in selected]
    if not picked:
        st.info(t("runs.pick_some"))
        return
    x_axis = st.radio(t("runs.x_axis"), ["step", "epoch"], horizontal=True, key=K + "x",
                      format_func=lambda v: t(f"runs.x_{v}"))
    df = R.loss_curves({short(r): _losses(sid, r.id, r.finished_at) for r in picked},
                       {short(r): R.steps_per_epoch(r) for r in picked}, x=x_axis)
    if df.empty:
        st.info(t("runs.no_losses"))
        return
    st.plotly_chart(R.curves_figure(df, x_axis, t), key=K + "loss_chart", alt=t("a11y.runs_chart"))
    st.caption(t("runs.loss_caption"))


def downloads(run, sid: str, path) -> None:
    if not run.finished:   # a checkpoint mid-training is not the run's: nothing until it ends
        st.info(t("runs.downloads_wait"), icon=":material/hourglass_top:")
        return
    c1, c2, c3 = st.columns(3)
    has_ckpt, icon = path.is_file(), ":material/download:"
    no_ckpt = None if has_ckpt else t("runs.no_checkpoint")   # a disabled button says why
    c1.download_button(t("runs.download_checkpoint"), path.read_bytes if has_ckpt else b"",
                       file_name=f"cifarlab_{run.id[:8]}.pth", mime="application/octet-stream",
                       key=K + "dl_ckpt", disabled=not has_ckpt, icon=icon, help=no_ckpt)
    c1.caption(t("runs.checkpoint_caption"))
    plain = b""
    if has_ckpt:
        try:
            plain = _plain_state_dict(sid, run.id, path.stat().st_mtime)
        except (CifarLabError, OSError) as err:
            c2.error(t("errors.checkpoint_bad", message=error_text(err)))
    c2.download_button(t("runs.download_state_dict"), plain, file_name="cifar_net.pth",
                       mime="application/octet-stream", key=K + "dl_plain", disabled=not plain,
                       icon=icon, help=no_ckpt)
    cfg = R.config_of(run)
    c2.caption(t("runs.state_dict_caption") if cfg is None or cfg.model.is_tutorial
               else t("runs.state_dict_caption_custom"))
    script = ""
    try:
        script = R.run_script(run)
    except (ImportError, CifarLabError) as err:
        c3.caption(t("runs.script_unavailable", reason=error_text(err)[:300]))
    c3.download_button(t("runs.download_script"), script, file_name=f"cifar_run_{run.id[:8]}.py",
                       mime="text/x-python", key=K + "dl_script", disabled=not script,
                       icon=":material/code:")
    c3.caption(t("runs.script_caption"))
    why = (None if has_ckpt and cfg is not None else
           t("bundle.unavailable", reason=t("runs.bundle_no_checkpoint" if not has_ckpt
                                            else "runs.bundle_no_config")))
    # built when clicked (a deferred download), not at every rerun of the page
    mtime = path.stat().st_mtime if has_ckpt else 0.0
    st.download_button(t("bundle.download"),
                       (lambda: _bundle(sid, run.id, mtime, t.lang)) if not why else b"",
                       file_name=R.bundle_file_name(run), mime="application/zip",
                       key=K + "dl_bundle", disabled=bool(why), type="primary",
                       icon=":material/home:", help=why)
    st.caption(why or t("bundle.download_caption"))


def actions_section(queue, by_id: dict, sid: str) -> None:
    st.subheader(t("runs.actions_title"))
    if st.session_state.get(K + "run") not in by_id:
        st.session_state.pop(K + "run", None)
    # words that stay put and differ run to run: Streamlit finds the chosen option by its words
    run_id = st.selectbox(t("runs.choose_run"), list(by_id), key=K + "run",
                          format_func=lambda rid: f"{by_id[rid].name} · {rid[:8]}"
                          if by_id[rid].name else short(by_id[rid]))
    run = by_id[run_id]
    downloads(run, sid, queue.checkpoint(sid, run.id))   # the queue's checked path
    if run.error:
        st.warning(t("runs.run_error", error=run.error_text(t.lang)))
    if not queue.can_control(sid, run):
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
            messages.keep(K + "flash", "success", t("runs.deleted"))
            st.session_state.pop(K + "run", None)
            st.rerun()
        if n.button(t("common.cancel"), key=K + "delete_no"):
            st.session_state.pop(K + "confirm", None)
            st.rerun()


st.title(t("nav.runs"))
tab_lesson, tab_runs = st.tabs([t("lesson.title"), t("runs.title")], default=t("runs.title"))
with tab_lesson:
    lesson("runs")

with tab_runs:
    sid = session_id()
    messages.show(K + "flash", icon=":material/check:")
    queue = job_queue()
    all_runs = call_or_show(queue.runs, sid, kind="train")
    if all_runs is not None and not all_runs:
        st.info(t("runs.no_runs"), icon=":material/info:")
        st.page_link("pages/train.py", label=t("runs.go_train"), icon=":material/model_training:")
    elif all_runs:
        if queue.settings.shared_view:
            st.caption(t("runs.shared_view"))
        by_id = {r.id: r for r in all_runs}
        if K + "compare" not in st.session_state:
            finished = [r.id for r in all_runs if r.finished and r.status != "failed"]
            st.session_state[K + "compare"] = finished[:3]
        st.session_state[K + "compare"] = [i for i in st.session_state[K + "compare"] if i in by_id]
        selected = st.multiselect(t("runs.select_runs"), list(by_id), key=K + "compare",
                                  help=t("runs.compare_help"),
                                  format_func=lambda rid: short(by_id[rid]))
        curves_section(by_id, selected, sid)
        table_section(queue, all_runs, selected)
        st.divider()
        actions_section(queue, by_id, sid)

