"""What a run is: its record, statuses and validators. Every run id from outside goes through
``validate_run_id``, so nothing a browser sends becomes a file path."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from cifarlab import i18n
from cifarlab.errors import CifarLabError, JobError

RUN_ID_RE = re.compile(r"[0-9a-f]{32}")
SESSION_RE = re.compile(r"[A-Za-z0-9_-]{8,64}")
# a cookie id, a user name or e-mail, an IPv4 or IPv6 address (it only ever reaches SQL as a value)
OWNER_RE = re.compile(r"[A-Za-z0-9_.:@+-]{1,128}")

STATUSES = ("queued", "running", "done", "failed", "cancelled", "interrupted")
ACTIVE = ("queued", "running")
FINISHED = ("done", "failed", "cancelled", "interrupted")


def validate_run_id(run_id: Any) -> str:
    if isinstance(run_id, str) and RUN_ID_RE.fullmatch(run_id):
        return run_id
    raise JobError("serve.runs.bad_run_id", field="run_id", value=repr(run_id)[:40])


def validate_session(session: Any) -> str:
    if isinstance(session, str) and SESSION_RE.fullmatch(session):
        return session
    raise JobError("serve.runs.bad_session", field="session")


def validate_owner(owner: Any) -> str:
    if isinstance(owner, str) and OWNER_RE.fullmatch(owner):
        return owner
    raise JobError("serve.runs.bad_owner", field="owner", value=repr(owner)[:40])


def reason(code: str, **params: Any) -> dict[str, Any]:
    """Why a run ended: its code and parameters (any language) and the English sentence."""
    return {"error": i18n.t(f"errors.{code}", i18n.DEFAULT, **params), "error_code": code,
            "error_params": params}


@dataclass(frozen=True)
class Run:
    """One row of ``runs``, with its JSON fields parsed."""

    id: str
    session: str
    owner: str
    kind: str
    name: str | None
    status: str
    device: str
    holds: tuple[str, ...]        # devices it keeps to itself while it runs (exclusive jobs)
    config: dict
    image_epochs: int | None      # the compute it asked for: training images × epochs
    created_at: float
    started_at: float | None
    finished_at: float | None
    error: str | None             # English; error_text(lang) in the student's language
    error_code: str | None
    error_params: dict | None
    traceback: str | None = field(repr=False)
    result: dict | None = field(repr=False)
    env: dict | None = field(repr=False)
    checkpoint: str | None
    cancel_requested: bool
    worker_pid: int | None
    heartbeat: float | None
    progress: dict | None
    waited_s: float | None
    replica: str | None = None    # the serving process whose executor runs it (several replicas)

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    def error_text(self, lang: str = i18n.DEFAULT) -> str | None:
        """Why it failed (or was stopped), in ``lang``."""
        if self.error_code:
            return CifarLabError(self.error_code, **(self.error_params or {})).text(lang)
        return self.error


@dataclass(frozen=True)
class RunEvent:
    seq: int
    kind: str
    data: dict
    t: float


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this id exists and is not a zombie."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True
