"""Who is asking: the person behind a page, as the serving side sees them.

Pages build a ``Person`` (``pages.common.person()``) from the sign-in (``st.user`` through an
OpenID Connect provider, or the instructor's passphrase) or, for an anonymous student, from the
browser's session cookie, and pass it to every call that acts for someone. Roles are checked
here on the serving side, never only by hiding a button.

    Person(id="user:ana@school.edu", name="ana@school.edu", instructor=True)
    Person(id="browser:Xk3...", name="Ana")      # an anonymous student
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Person:
    """``id``: the owner id runs are kept under ("user:<e-mail>", "instructor:<name>" or
    "browser:<cookie id>"); ``name``: what others see (an e-mail, a nickname);
    ``instructor``: may act on classes."""

    id: str
    name: str
    instructor: bool = False
