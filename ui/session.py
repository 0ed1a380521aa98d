"""This browser's session id (the link's, the cookie's or the signed-in person's), secrets."""
from __future__ import annotations

import re
import secrets

import streamlit as st

from cifarlab.serve import identity

SESSION_RE = re.compile(r"[A-Za-z0-9_-]{8,64}")
COOKIE = "cifarlab_sid"
COOKIE_DAYS = 180


def _valid(sid) -> bool:
    # fullmatch: "$" alone would also accept a trailing newline ("?sid=<id>%0A")
    return isinstance(sid, str) and SESSION_RE.fullmatch(sid) is not None


def cookie(name: str) -> str | None:
    try:
        value = st.context.cookies.get(name)
    except Exception:  # noqa: BLE001 - no browser (AppTest): no cookies
        return None
    return value if isinstance(value, str) else None   # (AppTest's stand-in client: no str)


def _cookie_sid() -> str | None:
    sid = cookie(COOKIE)
    return sid if _valid(sid) else None


def host_secrets(name: str):
    """``st.secrets[name]``, or None: no secrets file, no such table, or a broken file."""
    try:
        section = st.secrets.get(name)
    except Exception:  # noqa: BLE001 - no secrets file, or a broken one: none
        return None
    return section if hasattr(section, "get") else None


def claims() -> dict | None:
    """The signed-in user's claims with an e-mail not called unverified (it is the person)."""
    try:
        user = dict(st.user)
    except Exception:  # noqa: BLE001 - sign-in not configured, or no script context
        return None
    verified = user.get("email") and user.get("email_verified") is not False
    return user if user.get("is_logged_in") and verified else None


def signed_in() -> bool:
    return claims() is not None


def _user_session() -> str | None:
    person, secret = claims(), (host_secrets("auth") or {}).get("cookie_secret")
    if person is None or not secret:
        return None
    return identity.user_session(str(person["email"]), str(secret))


def session_id() -> str:
    """The signed-in person's id, else the URL's (a reload finds the runs), the cookie's, new."""
    if "sid" not in st.session_state:
        sid = st.query_params.get("sid", "")
        st.session_state["sid"] = _user_session() or (sid if _valid(sid) else _cookie_sid()
                                                      or secrets.token_urlsafe(12))
    return st.session_state["sid"]


def browser_id() -> str:
    return _cookie_sid() or session_id()


def session_cookie_js(sid: str) -> str:
    """The script storing ``sid`` in a SameSite=Strict cookie, Secure over https (security.md)."""
    if not _valid(sid):   # [A-Za-z0-9_-] only, so it is safe inside the script
        raise ValueError("not a session id")
    # renewed on every visit: a month unused and it is gone
    return (f"document.cookie = '{COOKIE}={sid}; path=/; max-age={30 * 86400}; "
            "SameSite=Strict' + (location.protocol === 'https:' ? '; Secure' : '');")
