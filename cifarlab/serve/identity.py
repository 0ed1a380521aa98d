"""Who is asking (``Person``: roles are checked by every call that acts for someone, never only
by hiding a button), the instructor's passphrase hash, and guessing limits."""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from cifarlab.errors import CifarLabError

log = logging.getLogger("cifarlab.serve.identity")

USER = "user:"              # signed in through the identity provider: "user:<e-mail>"
BROWSER = "browser:"        # an anonymous browser: "browser:<cookie session id>"
PASSPHRASE_INSTRUCTOR = "instructor:passphrase"   # whoever knows the instructor's passphrase
SECRETS_TABLE = "cifarlab"  # [cifarlab] in .streamlit/secrets.toml
SECRETS_KEY = "instructor_passphrase_hash"
MIN_PASSPHRASE = 10         # characters: a passphrase, not a PIN (the hash is offline-guessable)

# scrypt's cost: 32 MiB and ~0.1 s a guess on a laptop (below OWASP's 2**17: a classroom's 2-core
# server stays responsive, and the rate limit below bounds online guessing).
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2 ** 15, 8, 1
_SALT_BYTES, _KEY_BYTES = 16, 32
# scrypt checks at once: each takes 32 MiB, and a flood of fresh browsers must not add up
_SCRYPT_SLOTS = threading.BoundedSemaphore(2)


class IdentityError(CifarLabError):
    """A bad passphrase hash in the secrets file, a passphrase too short."""


@dataclass(frozen=True)
class Person:
    """``id``: the owner their runs are kept under; ``name``: what others see."""

    id: str
    name: str
    instructor: bool = False


def signed_in(email: str, name: str | None = None, groups: Iterable[str] | str | None = None, *,
              instructors: Iterable[str] = (), instructor_group: str | None = None) -> Person:
    """Whom an identity provider vouches for; an instructor if listed or in ``instructor_group``."""
    email = email.strip().lower()
    if isinstance(groups, str):      # some providers send one group as a plain string
        groups = [groups]
    instructor = (bool(email) and email in {e.strip().lower() for e in instructors}
                  or bool(instructor_group) and instructor_group in {str(g) for g in groups or ()})
    return Person(id=USER + email, name=(name or "").strip() or email, instructor=instructor)


def user_session(email: str, secret: str) -> str:
    """A signed-in person's session, the same on each of their devices (unguessable: an HMAC)."""
    digest = hmac.new(secret.encode(), b"cifarlab-session:" + email.strip().lower().encode(),
                      hashlib.sha256).digest()
    return "u-" + _b64(digest)[:40]


def anonymous(browser_id: str, nickname: str = "") -> Person:
    return Person(id=BROWSER + browser_id, name=nickname)


def passphrase_instructor(name: str = "") -> Person:
    """Whoever gave the instructor's passphrase: one shared owner (no e-mail tells them apart)."""
    return Person(id=PASSPHRASE_INSTRUCTOR, name=name, instructor=True)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _scrypt(passphrase: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(passphrase.encode("utf-8"), salt=salt, n=n, r=r, p=p,
                          maxmem=256 * n * r + (1 << 20), dklen=_KEY_BYTES)


def hash_passphrase(passphrase: str, *, salt: bytes | None = None, n: int = SCRYPT_N,
                    r: int = SCRYPT_R, p: int = SCRYPT_P) -> str:
    """``scrypt$<n>$<r>$<p>$<salt>$<key>`` (URL-safe base64, a fresh salt): the secrets line."""
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


def verify_passphrase(passphrase: str, stored: str) -> bool:
    """Whether ``stored`` was made from ``passphrase`` (in constant time)."""
    n, r, p, salt, key = _parse_hash(stored)
    if not isinstance(passphrase, str) or not passphrase or len(passphrase) > 1024:
        return False
    with _SCRYPT_SLOTS:
        return hmac.compare_digest(_scrypt(passphrase, salt, n, r, p), key)


def secrets_line(stored: str) -> str:
    """The line to paste under ``[cifarlab]`` in ``.streamlit/secrets.toml`` (no escaping)."""
    _parse_hash(stored)   # IdentityError when it is no hash we made
    return f'{SECRETS_KEY} = "{stored}"'


@dataclass(frozen=True)
class Backoff:
    """After ``free`` failures, each one doubles the wait (``base_s`` up to ``cap_s``)."""

    free: int
    base_s: float
    cap_s: float

    def wait(self, failures: int, last: float, now: float) -> float:
        if failures < self.free:
            return 0.0
        delay = min(self.cap_s, self.base_s * 2.0 ** min(failures - self.free, 30))
        return max(0.0, last + delay - now)


_OVERALL = "*"


class AttemptLimiter:
    """Slows down guessing a secret, never someone who knows it: the browser's, the target's and
    everyone's recent failures, each with its ``Backoff``; a browser with fewer than
    ``guessing_after`` never waits. ``counters``: ``store.StoreCounters``."""

    def __init__(self, client: Backoff = Backoff(3, 2.0, 300.0),
                 target: Backoff = Backoff(10, 1.0, 300.0),
                 overall: Backoff = Backoff(30, 1.0, 300.0), *, counters: Any,
                 guessing_after: int = 2, clock: Callable[[], float] = time.time,
                 name: str = "attempts"):
        self.client, self.target, self.overall = client, target, overall
        self.guessing_after, self.name = guessing_after, name
        self.counters = counters
        self._clock = clock

    def wait(self, client: str, target: str = "") -> float:
        """Seconds before ``client`` may try ``target``; 0 for a browser that is not guessing."""
        now = self._clock()
        mine = self.counters.get("c:" + client, now)
        if mine[0] < self.guessing_after:
            return 0.0
        return max(self.client.wait(*mine, now),
                   self.target.wait(*self.counters.get("t:" + target, now), now),
                   self.overall.wait(*self.counters.get(_OVERALL, now), now))

    def failed(self, client: str, target: str = "") -> float:
        now = self._clock()
        mine = self.counters.add("c:" + client, now)
        self.counters.add("t:" + target, now)
        everyone = self.counters.add(_OVERALL, now)
        if mine[0] == max(self.guessing_after, self.client.free):   # a hash, never the id
            log.warning("cifarlab %s: browser %s made %d wrong attempts; it now waits",
                        self.name, hashlib.sha256(client.encode()).hexdigest()[:10], mine[0])
        if everyone[0] >= self.overall.free and (everyone[0] & (everyone[0] - 1)) == 0:
            log.warning("cifarlab %s: %d wrong attempts from everyone recently; browsers "
                        "that are guessing wait", self.name, everyone[0])
        return self.wait(client, target)

    def succeeded(self, client: str) -> None:
        self.counters.clear("c:" + client)


PASSPHRASE_TARGET = "instructor-passphrase"


def try_passphrase(passphrase: str, stored: str, client: str,
                   limiter: AttemptLimiter) -> float | None:
    """None for the instructor's passphrase, else the seconds to wait (before scrypt runs)."""
    wait = limiter.wait(client, PASSPHRASE_TARGET)
    if wait > 0:
        return wait
    if verify_passphrase(passphrase, stored):
        limiter.succeeded(client)
        return None
    return limiter.failed(client, PASSPHRASE_TARGET)
