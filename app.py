"""``streamlit run app.py``: the navigation, the language switch, the personal link."""
import streamlit as st

from ui import a11y, nav, session, signin
from ui.data import loading_notice, store_may_be_down
from ui.language import language_switch, translator, url_lang

st.set_page_config(page_title="CIFAR Lab", page_icon=":material/school:", layout="wide")
st.session_state["_app_frame"] = True  # pages check it: see ui.internals.ensure_app_frame

t = translator()
a11y.accessible_document(t.lang)

instructor = signin.person().instructor
presenting = nav.presenting(instructor)   # a projector: full width, nothing personal
if not presenting:
    with st.sidebar:
        language_switch("lang_select")
        if not session.signed_in():   # signed in: the runs follow the person, not a link
            st.caption(t("sidebar.your_link"), help=t("sidebar.your_link_help"))
            # wrapped: a code block that scrolls sideways is a region the keyboard cannot reach
            st.code(nav.resume_link(), language=None, wrap_lines=True)
        signin.sign_in_sidebar()   # the identity provider's, or the instructor's passphrase

# the URL state written back (page switches clear it); on a projector, the language only
wanted = url_lang() if presenting else nav.url_state()
for key in ("sid", "lang"):
    if key not in wanted:
        st.query_params.pop(key, None)
    elif st.query_params.get(key) != wanted[key]:
        st.query_params[key] = wanted[key]
# the id into the cookie, the same element every run (one that came and went took focus);
# signed in: the browser's own id stays for after sign-out, the person's is not it
cookie = "" if session.signed_in() else session.session_cookie_js(session.session_id())
st.html(f"<script>{cookie}</script>", unsafe_allow_javascript=True)
# the console is listed for instructors only; opened by its address, it asks anyone else to sign
# in, in their language (an unregistered path gets Streamlit's English "Page not found")
pages = [st.Page(path, title=t(f"nav.{pid}"), icon=icon, url_path=pid, default=(pid == "home"),
                 visibility="hidden" if (pid, path, icon) in nav.INSTRUCTOR_PAGES and not instructor
                 else "visible")
         for pid, path, icon in nav.PAGES + nav.INSTRUCTOR_PAGES]
current = st.navigation(pages, position="hidden" if presenting else "sidebar")
boot = loading_notice()   # said at once while the server's first pages still import torch
try:
    store_may_be_down(current.run)()   # the run store gone mid-page: said in the student's words
finally:
    boot.empty()
nav.lesson_links(current.url_path or "home")   # not reached when a page stops early
