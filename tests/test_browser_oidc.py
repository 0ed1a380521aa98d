"""Sign-in through a real OpenID Connect provider, in a real browser.

The test starts ``oidc-provider-mock`` (a small OIDC provider built on Authlib, from PyPI) on a
free port, and the app with a secrets file whose ``[auth]`` points at it (Streamlit's
``secrets.files`` option, given as ``STREAMLIT_SECRETS_FILES``). Chromium presses "Sign in",
picks a user on the provider's own form, and comes back signed in: the sidebar names the
person, an e-mail listed in the hosting setting ``instructors`` is an instructor and another
(whose groups do not hold ``instructor_group``) is not, "Sign out" signs out, and a run kept
for the person from another device is theirs here, whatever ``?sid=`` the link carries. (The
group rule itself: tests/test_identity.py.)
Nothing of ``st.user`` is mocked. The server is a fresh one, and its very first request is a
page (a link handed out in class): that page gets the app's frame and navigation."""
from __future__ import annotations

import os
import re
import secrets

import pytest

from browser_support import StreamlitServer, page_problems, screenshot, wait_idle
from cifarlab import i18n
from ui.nav import PAGES
from synthetic_run import running_row

pytestmark = [pytest.mark.browser,
              # the mock provider still uses Authlib APIs that Authlib now calls deprecated
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

ANA = ("ana@school.edu", "Ana Lima")        # listed in CIFARLAB_INSTRUCTORS
BEN = ("ben@school.edu", "Ben Costa")       # a student


@pytest.fixture(scope="module")
def provider():
    if os.environ.get("CI"):   # CI must run it (requirements-dev.txt installs the provider)
        import oidc_provider_mock as oidc
    else:
        oidc = pytest.importorskip("oidc_provider_mock")
    users = [oidc.User(sub=email, claims={"email": email, "email_verified": True, "name": name,
                                          "groups": ["staff"]})
             for email, name in (ANA, BEN)]
    with oidc.run_server_in_thread(port=0, user_claims=users) as server:
        yield f"http://localhost:{server.server_port}"


@pytest.fixture(scope="module")
def server(tmp_path_factory, provider, cifar_archive):
    home = tmp_path_factory.mktemp("oidc-home")
    srv = StreamlitServer(home, env={"CIFARLAB_DATA": str(cifar_archive),
                                     "CIFARLAB_INSTRUCTORS": f"{ANA[0].upper()}, x@y.org",
                                     "CIFARLAB_INSTRUCTOR_GROUP": "teachers",
                                     # no run is trained here: no worker kept warm
                                     "CIFARLAB_SPARE_WORKERS": "0"})
    srv.home, srv.cookie_secret = home, secrets.token_urlsafe(32)
    secrets_file = home / "secrets.toml"
    secrets_file.write_text(f"""[auth]
redirect_uri = "{srv.url}/oauth2callback"
cookie_secret = "{srv.cookie_secret}"
client_id = "cifarlab-test"
client_secret = "{secrets.token_urlsafe(16)}"
server_metadata_url = "{provider}/.well-known/openid-configuration"
""")
    srv.env["STREAMLIT_SECRETS_FILES"] = str(secrets_file)
    srv.start()
    yield srv
    srv.stop()


SIGN_IN = re.compile("^(Sign in|Iniciar sesión|Entrar)$")
SIGN_OUT = re.compile("^(Sign out|Cerrar sesión|Sair)$")


def signed_in_text(page) -> str:
    """The sidebar's "Signed in as ..." line, once the page shows it."""
    line = page.get_by_test_id("stSidebar").get_by_text(
        re.compile("Signed in as|Sesión iniciada como|Conectado como"))
    line.wait_for(timeout=60_000)
    return line.inner_text()


def sign_in(page, app_url: str, email: str) -> str:
    """Press the app's "Sign in" (as soon as the sidebar has it: the page below may still be
    running), choose ``email`` on the provider's form; returns the "Signed in as" line."""
    page.get_by_role("button", name=SIGN_IN).click(timeout=60_000)
    page.wait_for_url(re.compile(r"/oauth2/authorize"), timeout=30_000)
    page.get_by_role("button", name=email, exact=True).click()
    page.wait_for_url(lambda url: url.startswith(app_url) and "oauth2callback" not in url,
                      timeout=30_000)
    return signed_in_text(page)


def sign_out(page, app_url: str) -> None:
    """Press "Sign out": Streamlit forgets the person and sends the browser to the provider's
    end-session endpoint (the mock asks to confirm), which sends it back to the app."""
    page.get_by_role("button", name=SIGN_OUT).click()
    page.wait_for_url(re.compile(r"/oauth2/end_session"), timeout=30_000)
    page.get_by_role("button", name="End session").click()
    page.wait_for_url(lambda url: url.startswith(app_url) and "oauth2callback" not in url,
                      timeout=30_000)
    page.get_by_role("button", name=SIGN_IN).wait_for(timeout=60_000)


def test_sign_in_names_the_person_and_their_role_and_sign_out_forgets_them(server, browser):
    context = browser.new_context()
    try:
        page = context.new_page()
        # this server's very first request is a page (a link handed out in class): it gets the
        # app's frame, its translated navigation (not file names) and the language switch
        page.goto(f"{server.url}/tensors?lang=es")   # a light page: any page shows the frame
        wait_idle(page)
        nav = page.locator('[data-testid="stSidebarNav"]').inner_text()
        for pid, _, _ in PAGES:
            assert i18n.t(f"nav.{pid}", "es") in nav
        assert "common" not in nav.lower()
        assert page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').count() >= 1
        assert not page_problems(page)
        screenshot(page, "first-visit-tensors-es")
        # Spanish survives the provider's round trip (it sends the browser back to "/")
        assert sign_in(page, server.url, ANA[0]) == f"Sesión iniciada como {ANA[1]} (docente)"
        sign_out(page, server.url)
        assert not page.get_by_text(ANA[1]).count()
    finally:
        context.close()

    # Ben's run from another device: in the run store under his person's session, which only
    # his sign-in (and the server's cookie secret) leads to
    from cifarlab.core.config import TrainConfig
    from cifarlab.serve.identity import user_session
    from cifarlab.serve.store import RunStore

    store = RunStore(server.home / "runs.db")
    run_id = running_row(store, user_session(BEN[0], server.cookie_secret),
                         TrainConfig(epochs=1).to_dict(), name="ben-elsewhere",
                         owner="user:" + BEN[0])
    store.set_status(run_id, "cancelled")
    context = browser.new_context()   # another browser
    try:
        page = context.new_page()
        page.goto(f"{server.url}/runs?lang=en")
        assert sign_in(page, server.url, BEN[0]) == f"Signed in as {BEN[1]} (student)"
        page.goto(f"{server.url}/runs?lang=en&sid=someoneelses123")   # a link changes nothing
        page.get_by_text("ben-elsewhere").first.wait_for(timeout=60_000)
        wait_idle(page)
        assert "sid=" not in page.url                   # nothing of the person in the link
        assert not page_problems(page)
        screenshot(page, "oidc-student-en")
    finally:
        context.close()
