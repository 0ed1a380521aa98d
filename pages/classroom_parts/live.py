"""The console's board and challenge: fragments, so that their polling never reruns the console."""
from __future__ import annotations

import streamlit as st

from cifarlab.lab import classroom as view
from cifarlab.lab.train import poll_interval
from cifarlab.serve.classroom.model import Goal
from pages.classroom_parts import act, classroom
from ui import messages
from ui.data import queue
from ui.internals import set_fragment_interval
from ui.language import call_or_show, lang, t
from ui.nav import PRESENTER

# the board's refresh while a class run is queued or running, else slower (a quiet class)
BOARD_S, BOARD_IDLE_S = 2.0, 10.0
LEADER_S = 3.0        # the public leaderboard's refresh while the challenge is open
K = "cls_"


# ---------------------------------------------------------------------------- the board
def board_section(cr, me, code: str) -> None:
    st.caption(t("classroom.board.caption"))

    @st.fragment(run_every=BOARD_S)
    def board() -> None:
        rows = call_or_show(cr.board, me, code)
        if rows is None:
            return
        set_fragment_interval(poll_interval(rows, BOARD_S, BOARD_IDLE_S))
        messages.show(K + "board_msg", once=False)   # the last action's outcome stays
        if not rows:
            st.info(t("classroom.board.empty"))
            return
        c = st.column_config
        st.dataframe(view.board_table(rows, lang()), hide_index=True, width="stretch",
                     placeholder="–", column_config={
            "nickname": t("classroom.board.nickname"), "status": t("classroom.board.status"),
            "queue": c.NumberColumn(t("classroom.board.queue"), format="%d"),
            "loss": c.LineChartColumn(t("classroom.board.loss"), width="small"),
            "progress": c.ProgressColumn(t("classroom.board.progress"), format="percent"),
            "accuracy": c.NumberColumn(t("classroom.board.accuracy"), format="%.1f %%"),
            "device": t("classroom.board.device"), "started": t("classroom.board.started")})
        by_id = {r.run_id: r for r in rows}
        if st.session_state.get(K + "board_run") not in by_id:
            st.session_state[K + "board_run"] = rows[0].run_id
        pick, cancel, pin = st.columns([3, 2, 2], vertical_alignment="bottom")
        # no status in an option's words: words that change (a run moving on) choose nothing
        labels = {rid: t("classroom.board.pick_option", nickname=r.nickname,
                         time=view.clock(r.created_at)) for rid, r in by_id.items()}
        # kept while another tab is open (the board is drawn only in its own)
        pick.selectbox(t("classroom.board.pick"), list(by_id), key=K + "board_run",
                       format_func=labels.get, persist_state="page")
        run = by_id[st.session_state[K + "board_run"]]
        msg = K + "board_msg"
        cancel.button(t("classroom.board.cancel"), key=K + "board_cancel", icon=":material/stop:",
                      disabled=run.status not in ("queued", "running"), on_click=act,
                      args=(msg, cr.cancel_run, code, run.run_id), kwargs={"done": lambda s: t(
                          "classroom.board.cancelled", nickname=run.nickname,
                          status=view.status_text(s, lang()))})
        pin.button(t("classroom.board.pin"), key=K + "board_pin", icon=":material/push_pin:",
                   on_click=act, args=(msg, cr.pin, code, run.run_id), kwargs={
                       "done": lambda _: t("classroom.board.pinned", nickname=run.nickname)})

    board()
    if st.button(t("classroom.presenter.open"), help=t("classroom.presenter.open_help"),
                 icon=":material/co_present:", key=K + "presenter_open"):
        st.query_params[PRESENTER[0]] = PRESENTER[1]
        st.query_params[view.CODE_PARAM] = code
        st.rerun()


# ---------------------------------------------------------------------------- challenge
def _open_challenge(code: str) -> None:
    """The Open button's callback: the goal from the form."""
    ss = st.session_state
    if ss.get(K + "ch_kind") == "fastest_to":
        goal = Goal("fastest_to", target=ss.get(K + "ch_target") / 100)
    else:   # the engine reads the device "any" as none in particular
        goal = Goal("best_accuracy", max_epochs=ss.get(K + "ch_epochs"),
                    device=ss.get(K + "ch_device"))
    act(K + "ch_msg", classroom().open_challenge, code, goal,
        done=lambda _: t("classroom.challenge.opened"))


def boards(cr, me, code: str, ch, csv: bool = True) -> None:
    """The public board, and the private one beside it once the challenge is closed."""
    shown = ["public"] if ch.is_open else ["public", "private"]
    for column, which in zip(st.columns(len(shown)), shown):
        with column:
            leaderboard(cr, me, code, which, ch.goal.kind, csv)


def leaderboard(cr, me, code: str, which: str, kind: str, csv: bool) -> None:
    name = t(f"classroom.challenge.{which}")
    st.markdown(f"**{name}**")
    rows = call_or_show(cr.leaderboard, me, code, which)
    if rows is None:
        return
    if not rows:
        st.caption(t("classroom.challenge.board_empty"))
    else:
        st.table(view.leader_table(rows, kind, lang()), hide_index=True)
    if csv:
        st.download_button(t("classroom.challenge.download", board=name),
                           view.leader_csv(rows, which, kind),
                           file_name=f"{code}-{which}.csv", mime="text/csv",
                           key=K + f"csv_{which}", icon=":material/download:", on_click="ignore")


def challenge_section(cr, me, info, boards_shown: bool = True) -> None:
    """The challenge's state, button and form; its boards when ``boards_shown`` (they poll)."""
    st.caption(t("classroom.challenge.help"))
    messages.show(K + "ch_msg")
    ch = info.challenge
    if ch is None:
        st.caption(t("classroom.challenge.none"))
    else:
        state = (t("classroom.challenge.state_open", time=view.clock(ch.opened_at)) if ch.is_open
                 else t("classroom.challenge.state_closed", time=view.clock(ch.closed_at)))
        st.markdown(f"**{view.goal_text(ch.goal, lang())}** · {state}")
        if ch.is_open:
            st.button(t("classroom.challenge.close"), key=K + "ch_close", type="primary",
                      icon=":material/flag:", on_click=act,
                      args=(K + "ch_msg", cr.close_challenge, info.code),
                      kwargs={"done": lambda _: t("classroom.challenge.closed")})
        if boards_shown:   # the open challenge's public board is live
            st.fragment(boards, run_every=LEADER_S if ch.is_open else None)(cr, me, info.code, ch)
        if ch.is_open:   # one challenge at a time: no form for another
            return
        st.divider()
    with st.form(K + "challenge", border=False):
        # options in words made now: a format_func may be called outside this run's language
        kinds = {k: t(f"classroom.challenge.kind_{k}") for k in ("best_accuracy", "fastest_to")}
        st.radio(t("classroom.challenge.kind"), list(kinds), key=K + "ch_kind", horizontal=True,
                 format_func=kinds.get)
        a, b, c = st.columns(3)
        a.number_input(t("classroom.challenge.max_epochs"), value=1, step=1, format="%d",
                       key=K + "ch_epochs")
        devices = {"any": t("classroom.challenge.device_any")} | {
            d: d for d in queue().devices()}
        b.selectbox(t("classroom.challenge.device"), list(devices), key=K + "ch_device",
                    format_func=devices.get)
        c.number_input(t("classroom.challenge.target"), value=50.0, step=5.0,
                       key=K + "ch_target")
        st.form_submit_button(t("classroom.challenge.open"), on_click=_open_challenge,
                              key=K + "ch_open", args=(info.code,), type="primary",
                              icon=":material/emoji_events:")
