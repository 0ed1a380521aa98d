"""ui.messages: what a callback keeps for the rerun it asks for, shown once or until replaced."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _app(once: bool) -> AppTest:
    def script(once):
        import streamlit as st

        from ui import messages

        if st.button("act"):
            messages.keep("msg", "success", f"done {st.session_state.get('n', 0)}")
            st.session_state["n"] = st.session_state.get("n", 0) + 1
        messages.show("msg", once=once)

    return AppTest.from_function(script, args=(once,))


def test_a_message_shown_once_is_gone_at_the_next_run():
    at = _app(once=True).run()
    at.button[0].click().run()
    assert [m.value for m in at.success] == ["done 0"]
    at.run()                                 # a poll, not an action
    assert not at.success


def test_a_message_kept_stays_until_the_next_action_replaces_it():
    at = _app(once=False).run()
    at.button[0].click().run()
    at.run()
    at.run()                                 # polls keep showing the last action's outcome
    assert [m.value for m in at.success] == ["done 0"]
    at.button[0].click().run()
    assert [m.value for m in at.success] == ["done 1"]
