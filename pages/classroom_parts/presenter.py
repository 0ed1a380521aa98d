"""The projector's view of a class (``?view=presenter&class=CODE``): nothing personal on it."""
from __future__ import annotations

import functools

import streamlit as st

from cifarlab.core.safe_text import md_escape
from cifarlab.lab import classroom as words
from cifarlab.lab.train import RunView, poll_interval
from cifarlab.lab.train_live import chart_texts, loss_figure
from pages.classroom_parts import experiment, join_link, live
from ui.internals import set_fragment_interval
from ui.language import call_or_show, lang, pct, t
from ui.nav import PRESENTER

K = "cls_pv_"
REFRESH_S = 2.0
IDLE_S = live.BOARD_IDLE_S   # nothing queued or running: a projector may be left on all lesson
VIEWS = ("run", "board", "leaders", "experiment")
MAX_ROWS = 24   # the board's newest runs: what a projector shows legibly
# large type for the room; the class code larger still (constant rules, no text spliced in)
STYLE = """<style>
[data-testid="stMainBlockContainer"] {padding-top: 1.5rem; max-width: 100%}
.st-key-cls_pv_page p, .st-key-cls_pv_page td, .st-key-cls_pv_page th {font-size: 1.5rem}
.st-key-cls_pv_code h1 {font-size: 5.5rem; letter-spacing: .08em; line-height: 1; padding: 0}
</style>"""


def _back() -> None:
    st.query_params.pop(PRESENTER[0], None)
    st.query_params.pop(words.CODE_PARAM, None)


def view(cr, me, code: str | None) -> None:
    """The whole projector view of class ``code`` (else the console's chosen class)."""
    st.html(STYLE)
    st.button(t("classroom.presenter.back"), icon=":material/arrow_back:", type="tertiary",
              key=K + "back", on_click=_back)
    info = call_or_show(cr.get_class, me, code or st.session_state.get("cls_code"))
    if info is None:
        return
    with st.container(key=K + "page"):
        left, right = st.columns([5, 1], vertical_alignment="center")
        with left:
            st.markdown(f"## {md_escape(info.title)}")
            st.markdown(t("classroom.presenter.join", link=join_link(info.code)))
            with st.container(key=K + "code"):
                st.markdown(f"# {info.code}")   # the engine's code: its own letters only
        right.image(words.qr_png(join_link(info.code)), width="stretch",
                    caption=t("classroom.presenter.scan"),
                    alt=t("classroom.qr_alt", code=info.code))
        labels = {v: t(f"classroom.presenter.show_{v}") for v in VIEWS}
        shown = st.segmented_control(
            t("classroom.presenter.show"), VIEWS, key=K + "show", required=True,
            default="run" if info.pinned else "board", format_func=labels.get)
        large_picture = functools.partial(experiment.picture, height=760, font=20)
        {"run": pinned_run, "board": board, "leaders": leaders,
         "experiment": large_picture}[shown or "run"](cr, me, info.code)


@st.fragment(run_every=REFRESH_S)
def pinned_run(cr, me, code: str) -> None:
    """The pinned run: who, where it is, its loss for the room."""
    # what this projector drew of the pinned run, read on from there (the whole of a long
    # run's losses every refresh would cost the server more each time)
    held = st.session_state.get(K + "pinned")
    p = call_or_show(cr.presenter, me, code, *((held[1].last_step, held[1].last_seq)
                                                if held else (0, 0)))
    if p is not None and held is not None and held[0] != p.created_at:   # another run pinned
        held, p = None, call_or_show(cr.presenter, me, code)
    if p is None:
        st.info(t("classroom.presenter.none"))
        return
    set_fragment_interval(poll_interval([p], REFRESH_S, IDLE_S))
    facts = [words.status_text(p.status, lang())]
    if p.progress is not None:
        facts.append(t("classroom.presenter.progress", pct=pct(p.progress, 0)))
    if p.accuracy is not None:
        facts.append(t("classroom.presenter.accuracy", acc=pct(p.accuracy)))
    st.markdown("### " + t("classroom.presenter.heading", nickname=md_escape(p.nickname))
                + " · " + " · ".join(facts))
    if held is None:
        held = st.session_state[K + "pinned"] = (p.created_at, RunView())
    run = held[1]   # the chart the student's Train page draws, in the room's type size
    run.add_events(p.events)
    run.series.add(p.steps, p.losses)
    if not run.series.count:
        st.caption(t("classroom.presenter.waiting"))
        return
    fig = loss_figure(run.chart(), lang())[1].update_layout(height=480, font_size=22, margin_t=96)
    fig.update_xaxes(automargin=True).update_yaxes(automargin=True)   # the large ticks' room
    st.plotly_chart(fig, width="stretch", key=K + "chart", config={"displayModeBar": False},
                    theme=None, alt=t("a11y.presenter_chart"))
    st.caption(chart_texts(run, p.log_every, lang())[0])


@st.fragment(run_every=REFRESH_S)
def board(cr, me, code: str) -> None:
    """The class's newest runs: nickname, status, progress, accuracy."""
    rows = call_or_show(cr.board, me, code, MAX_ROWS)
    if rows is None:
        return
    set_fragment_interval(poll_interval(rows, REFRESH_S, IDLE_S))
    if not rows:
        st.info(t("classroom.board.empty"))
        return
    st.table(words.projector_board(rows, lang()), hide_index=True)


@st.fragment(run_every=REFRESH_S)
def leaders(cr, me, code: str) -> None:
    """The challenge's goal and its public board (the private one too, once closed)."""
    info = call_or_show(cr.get_class, me, code)
    ch = None if info is None else info.challenge
    if ch is None:
        st.info(t("classroom.challenge.none"))
        return
    st.markdown(f"### {words.goal_text(ch.goal, lang())}")
    live.boards(cr, me, code, ch, csv=False)
