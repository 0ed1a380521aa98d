"""Who is asking: the person behind a page, as the serving side sees them.

Pages build a ``Person`` (``ui.signin.person()``) from the sign-in (``st.user`` through an
OpenID Connect provider, or the instructor's passphrase) or, for an anonymous student, from the
browser's session cookie, and pass it to every call that acts for someone. Roles are checked
here on the serving side, never only by hiding a button.

    Person(id="user:ana@school.edu", name="Ana Lima", instructor=True)   # signed in (OIDC)
    Person(id="instructor:passphrase", name="", instructor=True)        # the passphrase
    Person(id="browser:Xk3...", name="Ana")      # an anonymous student

Without an identity provider the instructor proves the role with a passphrase whose salted
scrypt hash sits in the server's secrets file (``hash_passphrase`` makes it, ``python -m
cifarlab passphrase`` prints the line, ``verify_passphrase`` checks it in constant time), and
``AttemptLimiter`` slows down guessing it (and, for the classroom, class codes).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterable

from cifarlab.errors import CifarLabError

USER = "user:"              # signed in through the identity provider: "user:<e-mail>"
BROWSER = "browser:"        # an anonymous browser: "browser:<cookie session id>"
PASSPHRASE_INSTRUCTOR = "instructor:passphrase"   # whoever knows the instructor's passphrase
SECRETS_TABLE = "cifarlab"  # [cifarlab] in .streamlit/secrets.toml
SECRETS_KEY = "instructor_passphrase_hash"
MIN_PASSPHRASE = 10         # characters: a passphrase, not a PIN (the hash is offline-guessable)

# scrypt's cost: 2**15 x 8 x 128 bytes = 32 MiB and ~0.1 s a guess on a laptop (OWASP's
# interactive minimum is 2**17 for N with r=8, p=1 in 2023; 2**15 keeps a classroom's 2-core
# server responsive while the rate limit below bounds online guessing).
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2 ** 15, 8, 1
_SALT_BYTES, _KEY_BYTES = 16, 32


class IdentityError(CifarLabError):
    """Sign-in went wrong: a bad passphrase hash in the secrets file, a passphrase too short."""


@dataclass(frozen=True)
class Person:
    """``id``: the owner id runs are kept under ("user:<e-mail>", "instructor:<name>" or
    "browser:<cookie id>"); ``name``: what others see (an e-mail, a nickname);
    ``instructor``: may act on classes."""

    id: str
    name: str
    instructor: bool = False


def signed_in(email: str, name: str | None = None, groups: Iterable[str] | str | None = None, *,
              instructors: Iterable[str] = (), instructor_group: str | None = None) -> Person:
    """The person an identity provider vouches for. An instructor when their e-mail is listed
    in ``instructors`` (any letter case) or ``instructor_group`` is one of their ``groups``."""
    email = email.strip().lower()
    return Person(id=USER + email, name=(name or "").strip() or email,
                  instructor=is_instructor(email, groups, instructors=instructors,
                                           instructor_group=instructor_group))


def user_session(email: str, secret: str) -> str:
    """The run-store session of a signed-in person: the same on every device they sign in
    from, and unguessable without the server's secret (an HMAC of the e-mail), since a session
    id is what lets a browser see runs."""
    digest = hmac.new(secret.encode(), b"cifarlab-session:" + email.strip().lower().encode(),
                      hashlib.sha256).digest()
    return "u-" + _b64(digest)[:40]


def is_instructor(email: str, groups: Iterable[str] | str | None = None, *,
                  instructors: Iterable[str] = (), instructor_group: str | None = None) -> bool:
    if email and email.strip().lower() in {e.strip().lower() for e in instructors}:
        return True
    if not instructor_group:
        return False
    if isinstance(groups, str):      # some providers send one group as a plain string
        groups = [groups]
    return instructor_group in {str(g) for g in (groups or ())}


def anonymous(browser_id: str, nickname: str = "") -> Person:
    """A student without sign-in: this browser's cookie session id."""
    return Person(id=BROWSER + browser_id, name=nickname)


def passphrase_instructor(name: str = "") -> Person:
    """Whoever gave the instructor's passphrase (one shared role: no e-mail to tell them
    apart, so their runs and classes are one owner's, on any device they sign in from)."""
    return Person(id=PASSPHRASE_INSTRUCTOR, name=name, instructor=True)


# -- the instructor's passphrase ------------------------------------------------------------

def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _scrypt(passphrase: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(passphrase.encode("utf-8"), salt=salt, n=n, r=r, p=p,
                          maxmem=256 * n * r + (1 << 20), dklen=_KEY_BYTES)


def hash_passphrase(passphrase: str, *, salt: bytes | None = None, n: int = SCRYPT_N,
                    r: int = SCRYPT_R, p: int = SCRYPT_P) -> str:
    """``scrypt$<n>$<r>$<p>$<salt>$<key>`` (URL-safe base64): what the secrets file keeps.
    A fresh random salt each time, so two hashes of one passphrase differ."""
    if len(passphrase) < MIN_PASSPHRASE:
        raise IdentityError("identity.passphrase_short", min=MIN_PASSPHRASE)
    salt = secrets.token_bytes(_SALT_BYTES) if salt is None else salt
    key = _scrypt(passphrase, salt, n, r, p)
    return f"scrypt${n}${r}${p}${_b64(salt)}${_b64(key)}"


def _parse_hash(stored: str) -> tuple[int, int, int, bytes, bytes]:
    try:
        scheme, n, r, p, salt, key = stored.strip().split("$")
        n, r, p = int(n), int(r), int(p)
        salt, key = _unb64(salt), _unb64(key)
    except (ValueError, AttributeError, TypeError):
        raise IdentityError("identity.bad_hash", setting=SECRETS_KEY) from None
    # bounds: a hash pasted from elsewhere must not make each guess cost gigabytes
    if (scheme != "scrypt" or not (2 ** 10 <= n <= 2 ** 20) or n & (n - 1) or not 1 <= r <= 32
            or not 1 <= p <= 16 or len(salt) < 8 or len(key) != _KEY_BYTES):
        raise IdentityError("identity.bad_hash", setting=SECRETS_KEY)
    return n, r, p, salt, key


def check_hash(stored: str) -> None:
    """Raise ``IdentityError("identity.bad_hash")`` when ``stored`` is no hash we made."""
    _parse_hash(stored)


def verify_passphrase(passphrase: str, stored: str) -> bool:
    """Whether ``passphrase`` is the one ``stored`` was made from (compared in constant time).
    A damaged ``stored`` raises ``IdentityError``: the host must fix the secrets file."""
    n, r, p, salt, key = _parse_hash(stored)
    if not isinstance(passphrase, str) or not passphrase or len(passphrase) > 1024:
        return False
    return hmac.compare_digest(_scrypt(passphrase, salt, n, r, p), key)


def secrets_line(stored: str) -> str:
    """The line to paste under ``[cifarlab]`` in ``.streamlit/secrets.toml`` (the hash holds
    only ``[A-Za-z0-9_$-]``, so it needs no TOML escaping)."""
    check_hash(stored)
    return f'{SECRETS_KEY} = "{stored}"'


# -- slowing down guesses -------------------------------------------------------------------

class AttemptLimiter:
    """Failed attempts per key (a browser) and overall, in a sliding window.

    ``wait(key)`` is 0 when an attempt may go ahead, else the seconds until one may: after
    ``per_key`` failures of one key within ``window`` seconds, or ``overall`` failures of all
    keys together (someone clearing their cookies to get a fresh key still meets the overall
    limit). ``failed(key)`` records a failure; ``succeeded(key)`` forgets that key's. Safe
    from many threads (Streamlit runs each session's script in its own)."""

    def __init__(self, per_key: int = 5, overall: int = 30, window: float = 60.0,
                 clock: Callable[[], float] = time.monotonic, max_keys: int = 10_000):
        self.per_key, self.overall, self.window = per_key, overall, window
        self._clock, self._max_keys = clock, max_keys
        self._lock = threading.Lock()
        self._by_key: dict[str, deque[float]] = {}
        self._all: deque[float] = deque()

    def _expire(self, times: deque[float], now: float) -> None:
        while times and times[0] <= now - self.window:
            times.popleft()

    def wait(self, key: str) -> float:
        with self._lock:
            now = self._clock()
            self._expire(self._all, now)
            times = self._by_key.get(key)
            if times is not None:
                self._expire(times, now)
                if not times:
                    del self._by_key[key]
            waits = [0.0]
            if times and len(times) >= self.per_key:
                waits.append(times[-self.per_key] + self.window - now)
            if len(self._all) >= self.overall:
                waits.append(self._all[-self.overall] + self.window - now)
            return max(waits)

    def failed(self, key: str) -> None:
        with self._lock:
            now = self._clock()
            if key not in self._by_key and len(self._by_key) >= self._max_keys:
                # memory stays bounded under a flood of fresh keys: drop the stalest key
                # (the overall limit still counts its failures)
                del self._by_key[min(self._by_key, key=lambda k: self._by_key[k][-1]
                                     if self._by_key[k] else 0.0)]
            self._by_key.setdefault(key, deque(maxlen=max(self.per_key, 1))).append(now)
            self._all.append(now)
            while len(self._all) > self.overall:
                self._all.popleft()

    def succeeded(self, key: str) -> None:
        with self._lock:
            self._by_key.pop(key, None)
