"""Sign-in without an identity provider, and who is asking.

The instructor's passphrase (a salted scrypt hash, checked against the standard library's own
scrypt), the line ``python -m cifarlab passphrase`` prints, the hosting settings that name
instructors, the limit on wrong guesses, and the sidebar's passphrase sign-in in AppTest in
English, Spanish and Portuguese. The OpenID Connect sign-in is tried against a real provider
in tests/test_browser_oidc.py."""
from __future__ import annotations

import base64
import hashlib
import io
import tomllib

import pytest
from streamlit.testing.v1 import AppTest

from cifarlab import cli, i18n
from cifarlab.serve import identity
from cifarlab.serve.database import Database
from cifarlab.serve.identity import AttemptLimiter, Backoff, IdentityError, Person
from cifarlab.serve.schema import COUNTERS
from cifarlab.serve.store import StoreCounters
from cifarlab.serve.settings import SettingsError, load_settings

PHRASE = "correct horse battery staple"
FAST = dict(n=2 ** 10, r=8, p=1)   # the cheapest cost verify accepts: the tests stay quick


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# -- the passphrase hash ------------------------------------------------------------------

def test_the_hash_is_the_standard_librarys_scrypt_with_a_fresh_salt():
    stored = identity.hash_passphrase(PHRASE)          # the real cost, once
    scheme, n, r, p, salt, key = stored.split("$")
    assert (scheme, int(n), int(r), int(p)) == ("scrypt", identity.SCRYPT_N, 8, 1)
    assert len(_unb64(salt)) == 16
    assert _unb64(key) == hashlib.scrypt(PHRASE.encode(), salt=_unb64(salt), n=int(n), r=8, p=1,
                                         maxmem=64 * 2 ** 20, dklen=32)
    assert PHRASE not in stored
    assert identity.verify_passphrase(PHRASE, stored)
    assert identity.hash_passphrase(PHRASE, **FAST) != identity.hash_passphrase(PHRASE, **FAST)


@pytest.mark.parametrize("guess", ["correct horse battery stapl", "Correct horse battery staple",
                                   PHRASE + " ", "", "x" * 5000, None])
def test_anything_but_the_passphrase_is_refused(guess):
    assert not identity.verify_passphrase(guess, identity.hash_passphrase(PHRASE, **FAST))


def test_unicode_passphrases_work():
    stored = identity.hash_passphrase("contraseña del señor ação", **FAST)
    assert identity.verify_passphrase("contraseña del señor ação", stored)
    assert not identity.verify_passphrase("contrasena del senor acao", stored)


def test_a_short_passphrase_is_refused_with_a_code():
    with pytest.raises(IdentityError) as err:
        identity.hash_passphrase("tooshort")
    assert err.value.code == "identity.passphrase_short" and err.value.params["min"] == 10
    assert "10" in err.value.text("es")


@pytest.mark.parametrize("stored", [
    "", "plaintext", "scrypt$1024$8$1$c2FsdHNhbHQ", "bcrypt$1024$8$1$c2FsdHNhbHQ$" + "A" * 43,
    "scrypt$1000$8$1$c2FsdHNhbHRzYWx0$" + "A" * 43,          # n not a power of two
    "scrypt$4194304$8$1$c2FsdHNhbHRzYWx0$" + "A" * 43,       # a gigabyte a guess: refused
    "scrypt$1024$8$1$c2FsdHNhbHRzYWx0$" + "A" * 10,          # a key of the wrong length
    "scrypt$x$8$1$c2FsdHNhbHRzYWx0$" + "A" * 43])
def test_a_damaged_hash_is_an_error_for_the_host_not_a_wrong_guess(stored):
    with pytest.raises(IdentityError) as err:
        identity.verify_passphrase(PHRASE, stored)
    assert err.value.code == "identity.bad_hash"
    assert "python -m cifarlab passphrase" in err.value.text("pt")


# -- python -m cifarlab passphrase ---------------------------------------------------------

def _secrets_from(line: str) -> str:
    """The hash, read back the way Streamlit reads the secrets file (TOML)."""
    doc = tomllib.loads(f"[{identity.SECRETS_TABLE}]\n{line}")
    return doc[identity.SECRETS_TABLE][identity.SECRETS_KEY]


def test_the_command_prints_the_line_to_paste_from_standard_input(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(PHRASE + "\n"))
    assert cli.main(["passphrase"]) == 0
    out, err = capsys.readouterr()
    line = out.strip()
    assert line.startswith(f'{identity.SECRETS_KEY} = "scrypt$') and "\n" not in line
    assert identity.verify_passphrase(PHRASE, _secrets_from(line))
    assert not identity.verify_passphrase(PHRASE + "!", _secrets_from(line))
    assert "[cifarlab]" in err and ".streamlit/secrets.toml" in err


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_command_asks_twice_at_a_terminal(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", _Terminal())
    answers = iter([PHRASE, PHRASE])
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(answers))
    assert cli.main(["passphrase"]) == 0
    assert identity.verify_passphrase(PHRASE, _secrets_from(capsys.readouterr().out.strip()))

    answers = iter([PHRASE, PHRASE + "x"])
    assert cli.main(["passphrase"]) == cli.EXIT_BAD_INPUT
    out, err = capsys.readouterr()
    assert out == "" and "differ" in err


@pytest.mark.parametrize("typed, says", [("", "No passphrase"), ("short", "at least 10")])
def test_the_command_refuses_an_empty_or_short_passphrase(monkeypatch, capsys, typed, says):
    monkeypatch.setattr("sys.stdin", io.StringIO(typed + "\n"))
    assert cli.main(["passphrase"]) == cli.EXIT_BAD_INPUT
    out, err = capsys.readouterr()
    assert out == "" and says in err


# -- who is an instructor -----------------------------------------------------------------

def test_instructors_from_the_environment_and_the_file(tmp_path):
    s = load_settings(env={"CIFARLAB_INSTRUCTORS": " Ana@School.edu, ben@school.edu;ben@school.edu",
                           "CIFARLAB_INSTRUCTOR_GROUP": "teachers"})
    assert s.instructors == ("ana@school.edu", "ben@school.edu")
    assert s.instructor_group == "teachers" and s.groups_claim == "groups"
    f = tmp_path / "cifarlab.toml"
    f.write_text('[cifarlab]\ninstructors = ["Carla@School.edu"]\ngroups_claim = "roles"\n')
    s = load_settings(env={}, config_file=f)
    assert s.instructors == ("carla@school.edu",) and s.groups_claim == "roles"
    assert load_settings(env={"CIFARLAB_INSTRUCTORS": "d@x.org"}, config_file=f).instructors \
        == ("d@x.org",)      # the environment wins
    defaults = load_settings(env={})
    assert defaults.instructors == () and defaults.instructor_group is None


@pytest.mark.parametrize("env, value", [({"CIFARLAB_INSTRUCTORS": "ana, ben@school.edu"}, "'ana'"),
                                        ({"CIFARLAB_INSTRUCTORS": "a@@b"}, "'a@@b'")])
def test_a_mistyped_instructor_is_named(env, value):
    with pytest.raises(SettingsError) as err:
        load_settings(env=env)
    assert err.value.code == "serve.settings.emails"
    assert "CIFARLAB_INSTRUCTORS" in str(err.value) and value in str(err.value)
    assert "correo" in err.value.text("es")


def test_a_file_with_a_number_for_instructors_is_refused(tmp_path):
    f = tmp_path / "cifarlab.toml"
    f.write_text("instructors = 3\n")
    with pytest.raises(SettingsError) as err:
        load_settings(env={}, config_file=f)
    assert err.value.code == "serve.settings.emails"


def test_the_signed_in_person_and_their_role():
    listed = dict(instructors=("ana@school.edu",), instructor_group="teachers")
    assert identity.signed_in("Ana@School.edu", "Ana Lima", None, **listed) == Person(
        "user:ana@school.edu", "Ana Lima", True)
    assert identity.signed_in("ben@school.edu", None, ["staff"], **listed) == Person(
        "user:ben@school.edu", "ben@school.edu", False)
    assert identity.signed_in("carla@school.edu", "Carla", ["staff", "teachers"],
                              **listed).instructor
    assert identity.signed_in("carla@school.edu", "Carla", "teachers", **listed).instructor
    assert not identity.signed_in("carla@school.edu", "Carla", ["teachers"]).instructor
    assert not identity.signed_in("teachers@school.edu", "x", [], **listed).instructor
    assert identity.anonymous("abcdefgh1234", "Ana") == Person("browser:abcdefgh1234", "Ana")
    assert identity.passphrase_instructor() == Person("instructor:passphrase", "", True)


def test_a_signed_in_persons_session_is_theirs_on_every_device_and_unguessable():
    from cifarlab.serve.runs import validate_session

    one = identity.user_session("ana@school.edu", "server secret")
    assert one == identity.user_session(" Ana@School.EDU", "server secret")   # any device
    assert one != identity.user_session("ben@school.edu", "server secret")
    assert one != identity.user_session("ana@school.edu", "another server's secret")
    assert "ana" not in one and validate_session(one) == one   # a session the queue accepts


# -- guessing is slowed down --------------------------------------------------------------

class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def counters(folder) -> StoreCounters:
    """Failure counts in a run store of their own (as the app keeps them)."""
    return StoreCounters(Database(folder / "runs.db"), "test")


def test_a_guessing_browser_waits_longer_each_time_and_is_forgiven_after_a_right_try(tmp_path):
    clock = Clock()
    lim = AttemptLimiter(Backoff(3, 2.0, 300.0), Backoff(100, 1.0, 300.0),
                         Backoff(100, 1.0, 300.0), counters=counters(tmp_path), clock=clock)
    waits = []
    for _ in range(8):
        assert lim.wait("a", "t") == 0
        waits.append(lim.failed("a", "t"))
        clock.now += waits[-1]
    assert waits == [0, 0, 2, 4, 8, 16, 32, 64]       # doubling after the third failure
    assert lim.failed("a", "t") > 0 and lim.wait("a", "t") == 128
    assert lim.wait("b", "t") == 0                     # another browser is not held up
    clock.now += 128
    lim.succeeded("a")
    assert lim.wait("a", "t") == 0 and lim.failed("a", "t") == 0


def test_only_a_browser_that_has_been_guessing_meets_the_target_and_overall_limits(tmp_path):
    clock = Clock()
    lim = AttemptLimiter(Backoff(3, 2.0, 300.0), Backoff(4, 1.0, 300.0),
                         Backoff(6, 1.0, 300.0), counters=counters(tmp_path), guessing_after=2,
                         clock=clock)
    for i in range(3):                                 # three browsers, two wrong tries each
        for _ in range(2):
            lim.failed(f"bot{i}", "secret")
    assert lim.wait("bot0", "secret") > 0              # 6 failures: guessers wait ...
    assert lim.wait("fresh", "secret") == 0            # ... a browser that was not guessing not
    lim.failed("typo", "secret")
    assert lim.wait("typo", "secret") == 0             # one typo is not guessing
    lim.failed("typo", "secret")
    assert lim.wait("typo", "secret") > 0              # two are, while others guess too
    clock.now += 3600                                  # everything is forgotten in time
    assert all(lim.wait(k, "secret") == 0 for k in ("bot0", "typo"))


def test_a_flood_of_fresh_keys_is_forgotten_in_time(tmp_path):
    clock, kept = Clock(), counters(tmp_path)
    lim = AttemptLimiter(counters=kept, clock=clock)
    for i in range(300):
        lim.failed(f"k{i}", f"target{i}")
    assert kept.get("*", clock.now)[0] == 300          # everyone's count is kept
    clock.now += kept.forget_s
    lim.failed("late", "t")                            # a failure drops the stale ones
    with kept.db._read() as c:
        assert len(c.execute(COUNTERS.select()).all()) == 3


# -- the sidebar's passphrase sign-in, in AppTest ------------------------------------------

SCRIPT = """
import streamlit as st
from ui import signin
with st.sidebar:
    signin.sign_in_sidebar()
who = signin.person()
st.markdown(f"person={who.id}|{who.instructor}|owner={signin.owner_id()}")
"""


@pytest.fixture
def limiter(monkeypatch, tmp_path):
    """A fresh limiter whose clock stands still: a wait never runs out during a test."""
    fresh = AttemptLimiter(counters=counters(tmp_path), clock=Clock())
    monkeypatch.setattr("ui.signin.passphrase_limiter", lambda: fresh)
    return fresh


def app(lang: str, secrets: dict | None = None) -> AppTest:
    at = AppTest.from_string(SCRIPT, default_timeout=30)
    if secrets is not None:
        for k, v in secrets.items():
            at.secrets[k] = v
    at.query_params["lang"] = lang
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def who(at: AppTest) -> tuple[str, bool, str]:
    line = next(m.value for m in at.markdown if m.value.startswith("person="))
    pid, instructor, owner = line.removeprefix("person=").split("|")
    return pid, instructor == "True", owner.removeprefix("owner=")


def send(at: AppTest, phrase: str) -> AppTest:
    at.sidebar.text_input(key="identity_passphrase").input(phrase)
    at.sidebar.button[0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture(scope="module")
def stored() -> str:
    return identity.hash_passphrase(PHRASE, **FAST)


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_the_instructor_signs_in_with_the_passphrase(lang, stored, limiter):
    t = i18n.translator(lang)
    at = app(lang, {"cifarlab": {"instructor_passphrase_hash": stored}})
    pid, instructor, owner = who(at)
    assert pid.startswith("browser:") and not instructor and owner == pid
    assert at.sidebar.text_input(key="identity_passphrase").label == t("identity.passphrase")

    send(at, "not the passphrase at all")
    assert [e.value for e in at.sidebar.error] == [t("identity.wrong_passphrase")]
    assert not who(at)[1]

    send(at, PHRASE)
    assert not at.sidebar.error
    assert who(at) == ("instructor:passphrase", True, "instructor:passphrase")
    assert t("identity.instructor_signed_in") in [c.value for c in at.sidebar.caption]
    assert not any(PHRASE in str(v) for v in at.query_params.values())   # nothing in the URL

    at.sidebar.button(key="identity_sign_out").click().run()
    assert not who(at)[1] and who(at)[0] == pid
    other = app(lang, {"cifarlab": {"instructor_passphrase_hash": stored}})   # another browser
    assert who(other)[0] != pid and not who(other)[1]


def test_wrong_guesses_lock_the_browser_out_even_with_the_right_one(stored, limiter):
    t = i18n.translator("pt")
    at = app("pt", {"cifarlab": {"instructor_passphrase_hash": stored}})
    for _ in range(2):
        send(at, "wrong guess number")
        assert at.sidebar.error[0].value == t("identity.wrong_passphrase")
    send(at, "wrong guess number")               # the third: now the browser must wait
    message = at.sidebar.error[0].value
    assert message == t("identity.too_many", seconds=2)
    send(at, PHRASE)                             # refused unchecked while it waits
    assert at.sidebar.error and not who(at)[1]


def test_without_secrets_nobody_is_an_instructor_and_nothing_breaks(limiter):
    at = app("en")
    assert not at.sidebar.text_input and not at.sidebar.button and not at.sidebar.error
    assert who(at)[0].startswith("browser:") and not who(at)[1]


def test_a_damaged_hash_says_so_in_the_page(limiter):
    at = app("es", {"cifarlab": {"instructor_passphrase_hash": "scrypt$nonsense"}})
    send(at, PHRASE)
    assert "python -m cifarlab passphrase" in at.sidebar.error[0].value
    assert "dañado" in at.sidebar.error[0].value and not who(at)[1]


def test_with_a_provider_the_sidebar_offers_its_sign_in(limiter):
    auth = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "x" * 32,
            "client_id": "c", "client_secret": "s",
            "server_metadata_url": "http://localhost:1/.well-known/openid-configuration"}
    at = app("es", {"auth": auth})
    assert [b.label for b in at.sidebar.button] == ["Iniciar sesión"]
    assert not at.sidebar.text_input               # no passphrase box beside a provider
    assert who(at)[0].startswith("browser:")       # not signed in yet: this browser
