"""Sign-in through a real OpenID Connect provider, in a real browser.

The test starts ``oidc-provider-mock`` (a small OIDC provider built on Authlib, from PyPI) on a
free port, and the app with a secrets file whose ``[auth]`` points at it (Streamlit's
``secrets.files`` option, given as ``STREAMLIT_SECRETS_FILES``). Chromium presses "Sign in",
picks a user on the provider's own form, and comes back signed in: the sidebar names the
person, an e-mail listed in the hosting setting ``instructors`` is an instructor and another is
not, and "Sign out" signs out. Nothing of ``st.user`` is mocked."""
from __future__ import annotations

import re
import secrets

import pytest

from browser_support import StreamlitServer, page_problems, screenshot, wait_idle

pytestmark = pytest.mark.browser

ANA = ("ana@school.edu", "Ana Lima")        # listed in CIFARLAB_INSTRUCTORS
BEN = ("ben@school.edu", "Ben Costa")       # a student
CARLA = ("carla@school.edu", "Carla Dias")  # an instructor through her group


@pytest.fixture(scope="module")
def provider():
    oidc = pytest.importorskip("oidc_provider_mock")
    users = [oidc.User(sub=email, claims={"email": email, "email_verified": True, "name": name,
                                          **({"groups": ["staff", "teachers"]}
                                             if email == CARLA[0] else {})})
             for email, name in (ANA, BEN, CARLA)]
    with oidc.run_server_in_thread(port=0, user_claims=users) as server:
        yield f"http://localhost:{server.server_port}"


@pytest.fixture(scope="module")
def server(tmp_path_factory, provider, cifar_archive):
    home = tmp_path_factory.mktemp("oidc-home")
    srv = StreamlitServer(home, env={"CIFARLAB_DATA": str(cifar_archive),
                                     "CIFARLAB_INSTRUCTORS": f"{ANA[0].upper()}, x@y.org",
                                     "CIFARLAB_INSTRUCTOR_GROUP": "teachers"})
    secrets_file = home / "secrets.toml"
    secrets_file.write_text(f"""[auth]
redirect_uri = "{srv.url}/oauth2callback"
cookie_secret = "{secrets.token_urlsafe(32)}"
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
        page.goto(f"{server.url}/?lang=es")
        # Spanish survives the provider's round trip (it sends the browser back to "/")
        assert sign_in(page, server.url, CARLA[0]) == f"Sesión iniciada como {CARLA[1]} (docente)"
        sign_out(page, server.url)
        assert not page.get_by_text(CARLA[1]).count()
        # the same browser, another person: a student
        assert sign_in(page, server.url, BEN[0]) == f"Sesión iniciada como {BEN[1]} (estudiante)"
        wait_idle(page)
        assert not page_problems(page)
        screenshot(page, "oidc-student-es")
    finally:
        context.close()
    context = browser.new_context()   # another browser
    try:
        page = context.new_page()
        page.goto(f"{server.url}/?lang=en")
        assert sign_in(page, server.url, ANA[0]) == f"Signed in as {ANA[1]} (instructor)"
        wait_idle(page)
        assert not page_problems(page)
        screenshot(page, "oidc-instructor-en")
    finally:
        context.close()
