"""Hosting settings (README.md lists them): the environment > ``cifarlab.toml`` > defaults."""
from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from cifarlab.core.config import Limits
from cifarlab.errors import CifarLabError, JobError

CONFIG_ENV = "CIFARLAB_CONFIG"
DEFAULT_CONFIG_FILE = "cifarlab.toml"


class SettingsError(CifarLabError):
    """A hosting setting (environment variable or cifarlab.toml key) has a bad value."""


def cpu_cores() -> int:
    affinity = getattr(os, "sched_getaffinity", None)   # none on macOS
    return len(affinity(0)) if affinity else os.cpu_count() or 1


@dataclass(frozen=True)
class Settings:
    """Hosting limits and paths; build with ``load_settings()``."""

    home: Path
    data: str | None = None
    store_url: str | None = None
    cpu_slots: int = 1
    gpu_slots: int = 1
    worker_threads: int = 1
    max_queue: int = 50
    max_per_owner: int = 2
    max_epochs: int = 20
    max_train_images: int = 50000
    max_image_epochs_per_run: int = 500_000
    max_image_epochs_per_owner: int = 2_000_000
    max_num_workers: int = 8
    max_timing_seconds: float = 1200.0
    shared_view: bool = False
    spare_workers: int = 1
    heartbeat_timeout: float = 60.0
    backup_interval: float = 300.0
    worker_nice: int = 10
    executor: str = "local"
    ray_address: str | None = None
    gpu_share: int = 1
    instructors: tuple[str, ...] = ()
    instructor_group: str | None = None
    groups_claim: str = "groups"

    @property
    def db_path(self) -> Path:
        return self.home / "runs.db"

    @property
    def store_location(self) -> str | Path:
        return self.store_url or self.db_path

    @property
    def checkpoint_dir(self) -> Path:
        return self.home / "checkpoints"

    def limits(self) -> Limits:
        """What this server allows one run (``core.config.validate``)."""
        return Limits(max_epochs=self.max_epochs, max_train_images=self.max_train_images,
                      max_num_workers=self.max_num_workers)

    def slots_for(self, device: str) -> int:
        """How many runs may use ``device`` ("cpu", "cuda:N", "mps") at the same time."""
        if device == "cpu":
            return self.cpu_slots
        return self.gpu_slots if device.startswith("cuda") else 1


# name -> (kind, minimum, maximum): the kind is the field's type but for these; at least 1
# unless bounded here
_KINDS = {"home": "path", "store_url": "url", "executor": "choice", "instructors": "emails"}
_BOUNDS = {"max_num_workers": (0, None), "spare_workers": (0, None), "heartbeat_timeout": (5, None),
           "backup_interval": (10, None), "worker_nice": (0, 19), "gpu_share": (1, 16)}
_FIELDS: dict[str, tuple[str, float | None, float | None]] = {
    f.name: (_KINDS.get(f.name) or f.type.split(" ")[0], *_BOUNDS.get(f.name, (1, None)))
    for f in dataclasses.fields(Settings)}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def env_name(field: str) -> str:
    return "CIFARLAB_" + field.upper()


def load_settings(env: Mapping[str, str] | None = None,
                  config_file: str | os.PathLike | None = None,
                  **overrides: Any) -> Settings:
    """``overrides`` (Python values) > ``env`` (``os.environ``) > the TOML file > defaults."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    path = config_file if config_file is not None else env.get(CONFIG_ENV) or None
    if path is not None:
        path = Path(path).expanduser()
        if not path.is_file():
            raise SettingsError("serve.settings.no_config_file", env=CONFIG_ENV, path=str(path))
    elif Path(DEFAULT_CONFIG_FILE).is_file():
        path = Path(DEFAULT_CONFIG_FILE)
    if path is not None:
        values.update({n: _parse(n, raw, f"{n} ({path})", path.resolve().parent)
                       for n, raw in _from_file(path).items()})
    given = {n: env[env_name(n)] for n in _FIELDS if env.get(env_name(n), "").strip() != ""}
    values.update({n: _parse(n, raw, env_name(n), Path.cwd()) for n, raw in given.items()})
    unknown = next((n for n in overrides if n not in _FIELDS), None)
    # max_per_owner's old name: refused, where it would be left at the default without a word
    if env.get("CIFARLAB_MAX_PER_SESSION", "").strip():
        unknown = "CIFARLAB_MAX_PER_SESSION"
    if unknown is not None:
        raise SettingsError("serve.settings.unknown_setting", name=unknown,
                            known=", ".join(_FIELDS))
    values.update({n: _parse(n, raw, n, Path.cwd()) for n, raw in overrides.items()})

    cores = cpu_cores()
    values.setdefault("home", (Path.cwd() / "var").resolve())
    values.setdefault("cpu_slots", max(1, cores // 2))
    # Leave the web server a core while every CPU slot trains (workers also run niced).
    spare_core = 1 if cores > 2 else 0
    values.setdefault("worker_threads", max(1, (cores - spare_core) // values["cpu_slots"]))
    return Settings(**values)


def _from_file(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except (tomllib.TOMLDecodeError, OSError) as err:   # the parser's or the system's words
        raise SettingsError("serve.settings.unreadable", path=str(path),
                            detail=getattr(err, "strerror", None) or str(err)) from None
    table = doc["cifarlab"] if isinstance(doc.get("cifarlab"), dict) else doc
    unknown = sorted(set(table) - set(_FIELDS))
    if unknown:
        raise SettingsError("serve.settings.unknown_keys", path=str(path),
                            names=", ".join(unknown), known=", ".join(_FIELDS))
    return table


def _parse(name: str, raw: Any, where: str, base: Path) -> Any:
    """``raw`` as setting ``name`` wants it; ``where`` names it in the error."""
    kind, low, high = _FIELDS[name]
    text = raw.strip() if isinstance(raw, str) else raw
    bad = {"field": name, "where": where, "got": repr(raw)}
    if kind == "int":
        value = int(text) if isinstance(text, str) and text.lstrip("+").isdigit() else text
        if type(value) is not int or value < low or (high is not None and value > high):
            code = ("serve.settings.whole_number" if high is None
                    else "serve.settings.whole_number_range")
            raise SettingsError(code, min=int(low), max=high, **bad)
        return value
    if kind == "float":
        try:
            value = math.nan if isinstance(text, bool) else float(text)
        except (TypeError, ValueError):
            value = math.nan
        if not (math.isfinite(value) and value >= low):
            raise SettingsError("serve.settings.seconds", min=low, **bad)
        return value
    word = str(text).lower() if isinstance(text, (str, bool)) else None
    if kind == "bool":
        if word not in _TRUE | _FALSE:
            raise SettingsError("serve.settings.boolean", **bad)
        return word in _TRUE
    if kind == "choice":   # the executor
        if word not in ("local", "ray"):
            raise SettingsError("serve.settings.choice", choices="local, ray", **bad)
        return word
    if kind == "emails":
        return _emails(text, bad)
    if kind == "url":
        return _store_url(text, bad)
    if kind == "path":
        if not isinstance(text, (str, os.PathLike)) or str(text) == "":
            raise SettingsError("serve.settings.folder", **bad)
        path = Path(text).expanduser()
        return (path if path.is_absolute() else base / path).resolve()
    if not isinstance(text, str):
        raise SettingsError("serve.settings.text", **bad)
    if not text and name == "groups_claim":
        return "groups"
    return text or None


_EMAIL = re.compile(r"[^@\s]+@[^@\s]+")


def _emails(value: Any, bad: dict) -> tuple[str, ...]:
    """E-mails from a TOML list or one text ("a@x.edu, b@x.edu"), lower-cased, each checked
    for the one "@" an address has (a typo would otherwise leave an instructor a student)."""
    items = re.split(r"[,;\s]+", value) if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(e, str) for e in items):
        raise SettingsError("serve.settings.emails", **bad)
    out = tuple(dict.fromkeys(e.strip().lower() for e in items if e.strip()))
    for item in out:
        if not _EMAIL.fullmatch(item):
            raise SettingsError("serve.settings.emails", **{**bad, "got": repr(item)})
    return out


def _store_url(value: Any, bad: dict) -> str | None:
    """A run store URL naming its database (the error shows it without its password)."""
    if value is None or value == "":
        return None
    from sqlalchemy.engine import make_url   # SQLAlchemy: only when a URL is set

    from cifarlab.serve.database import store_url

    with contextlib.suppress(JobError):
        if isinstance(value, str) and "://" in value and store_url(value).database:
            return value
    try:
        got = make_url(value).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - SQLAlchemy's ArgumentError, ValueError for a bad port
        got = repr(str(value).split("@")[-1])[:80]
    raise SettingsError("serve.settings.store_url", **{**bad, "got": got})
