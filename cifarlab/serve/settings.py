"""Hosting settings: where runs are kept and how much one server lets a classroom use.

Read once per process by ``load_settings()`` from environment variables and an optional TOML
file. An environment variable wins over the file; the file wins over the default.

The file is ``$CIFARLAB_CONFIG`` when that is set (it must then exist), else ``./cifarlab.toml``
when there is one in the working directory. Keys are the setting names below, at the top level
or under a ``[cifarlab]`` table; a relative ``home`` in the file is relative to the file::

    # cifarlab.toml
    home = "/srv/cifarlab"
    cpu_slots = 4
    max_epochs = 10
    shared_view = true

=====================  ==============================  ==========================================
Setting (TOML key)     Environment variable            Default and meaning
=====================  ==============================  ==========================================
``home``               ``CIFARLAB_HOME``               ``./var`` (relative to the working
                                                       directory). Holds ``runs.db`` (the run
                                                       store) and ``checkpoints/<run id>.pth``.
``data``               ``CIFARLAB_DATA``               unset: ``cifarlab.core.data``'s own default
                                                       (torchvision's download). The server's
                                                       data source: an image folder, a .tar.gz,
                                                       or ``download``. Students never pick it.
``cpu_slots``          ``CIFARLAB_CPU_SLOTS``          ``max(1, cores // 2)``: runs training on
                                                       the CPU at the same time, so the cores are
                                                       not oversubscribed.
``gpu_slots``          ``CIFARLAB_GPU_SLOTS``          ``1``: runs at the same time on each GPU
                                                       (``cuda:N``). Apple's ``mps`` always has 1.
``worker_threads``     ``CIFARLAB_WORKER_THREADS``     PyTorch threads (``torch.set_num_threads``)
                                                       in each run's worker process: ``max(1,
                                                       (cores - 1) // cpu_slots)`` on more than 2
                                                       cores, so the web server keeps a core
                                                       while every slot trains; else ``max(1,
                                                       cores // cpu_slots)``.
``max_queue``          ``CIFARLAB_MAX_QUEUE``          ``50``: runs waiting at most, all students
                                                       together; beyond it, Train says the queue
                                                       is full (it never hangs).
``max_per_owner``      ``CIFARLAB_MAX_PER_OWNER``      ``2``: runs one person may have queued or
                                                       running at once, across all their tabs
                                                       (the page names the person: a cookie, the
                                                       signed-in user, or the client address).
                                                       The old name ``max_per_session`` is read
                                                       too.
``max_epochs``         ``CIFARLAB_MAX_EPOCHS``         ``20``: most epochs one run may ask for.
``max_train_images``   ``CIFARLAB_MAX_TRAIN_IMAGES``   ``50000``: most training images one run
                                                       may use (its subset, or all 50,000).
``max_image_epochs_per_run``                           ``500000``: most compute one run may ask
  (``CIFARLAB_MAX_IMAGE_EPOCHS_PER_RUN``)              for, in image-epochs (training images ×
                                                       epochs; the tutorial's run is 100,000).
``max_image_epochs_per_owner``                         ``2000000``: most image-epochs one person's
  (``CIFARLAB_MAX_IMAGE_EPOCHS_PER_OWNER``)            runs may ask for in any 60 minutes (a
                                                       rolling hour; queued, running and finished
                                                       runs count, runs cancelled before they
                                                       started do not).
``max_num_workers``    ``CIFARLAB_MAX_NUM_WORKERS``    ``8``: most DataLoader worker processes
                                                       (``num_workers``) one run may ask for.
``max_timing_seconds`` ``CIFARLAB_MAX_TIMING_SECONDS`` ``1200``: longest a CPU-vs-GPU timing may
                                                       run. One whose estimate is longer is
                                                       refused before it starts; one that runs
                                                       past it is stopped, keeping its rows.
``shared_view``        ``CIFARLAB_SHARED_VIEW``        ``false``: when true (a class view),
                                                       everyone sees everyone's runs, read-only;
                                                       only the owner can cancel or delete.
``spare_workers``      ``CIFARLAB_SPARE_WORKERS``      ``1``: worker processes kept started and
                                                       warm (torch imported, data mapped) so a
                                                       run starts at once; 0 starts each cold.
``heartbeat_timeout``  ``CIFARLAB_HEARTBEAT_TIMEOUT``  ``60`` seconds: a running run whose worker
                                                       has not written a heartbeat for this long
                                                       is marked failed (or interrupted).
``backup_interval``    ``CIFARLAB_BACKUP_INTERVAL``    ``300`` seconds (at least 10): how often the
                                                       run store is copied (SQLite's online backup,
                                                       into ``home/backups``; also at shutdown; the
                                                       3 newest kept), to recover it if damaged.
``worker_nice``        ``CIFARLAB_WORKER_NICE``        ``10`` (0 to 19): how far below the web
                                                       server's priority workers run
                                                       (``os.nice``), so pages stay responsive
                                                       while every slot trains.
``executor``           ``CIFARLAB_EXECUTOR``           ``local``: where runs execute. ``local``:
                                                       a worker process per run on this machine.
                                                       ``ray``: a task per run on a Ray cluster
                                                       (needs ``requirements-ray.txt``; see
                                                       docs/hosting.md).
``ray_address``        ``CIFARLAB_RAY_ADDRESS``        unset: with ``executor = "ray"``, start a
                                                       Ray instance on this machine; else the
                                                       cluster to join (``auto``, or the head's
                                                       ``host:port``).
``gpu_share``          ``CIFARLAB_GPU_SHARE``          ``1``: on Ray, how many runs share one GPU
                                                       (each asks for ``1/gpu_share`` of it);
                                                       timing runs always take a whole GPU.
``instructors``        ``CIFARLAB_INSTRUCTORS``        none: e-mails of the people who are
                                                       instructors when they sign in through an
                                                       identity provider (a TOML list, or one
                                                       text with commas or spaces between them).
``instructor_group``   ``CIFARLAB_INSTRUCTOR_GROUP``   unset: a group whose members are
                                                       instructors, matched against the
                                                       provider's groups claim.
``groups_claim``       ``CIFARLAB_GROUPS_CLAIM``       ``groups``: the ID-token claim that lists
                                                       the signed-in person's groups.
=====================  ==============================  ==========================================

Whole numbers must be written as such (``"4"``, not ``"4.0"`` or ``"four"``); booleans as
``true/false``, ``1/0``, ``yes/no`` or ``on/off``. A bad value raises ``SettingsError`` naming the
variable (or file key) and the value, e.g. ``CIFARLAB_CPU_SLOTS must be a whole number ≥ 1, got
'x'``.
"""
from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from cifarlab.errors import CifarLabError

if TYPE_CHECKING:
    from cifarlab.core.config import Limits

ENV_PREFIX = "CIFARLAB_"
CONFIG_ENV = "CIFARLAB_CONFIG"
DEFAULT_CONFIG_FILE = "cifarlab.toml"
DEFAULT_HOME = "var"
DB_NAME = "runs.db"


class SettingsError(CifarLabError):
    """A hosting setting (environment variable or cifarlab.toml key) has a bad value."""


def cpu_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Settings:
    """Hosting limits and paths. Build with ``load_settings()``; see the module docstring."""

    home: Path
    data: str | None = None
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
        return self.home / DB_NAME

    @property
    def checkpoint_dir(self) -> Path:
        return self.home / "checkpoints"

    @property
    def max_per_session(self) -> int:
        """The old name of ``max_per_owner`` (pages/train.py still reads it)."""
        return self.max_per_owner

    def limits(self) -> Limits:
        """What this server allows one run, for ``core.config.validate``."""
        from cifarlab.core.config import Limits

        return Limits(max_epochs=self.max_epochs, max_train_images=self.max_train_images,
                      max_num_workers=self.max_num_workers)

    def slots_for(self, device: str) -> int:
        """How many runs may use ``device`` ("cpu", "cuda:N", "mps") at the same time."""
        if device == "cpu":
            return self.cpu_slots
        if device.startswith("cuda"):
            return self.gpu_slots
        return 1

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)


# name -> (kind, minimum, maximum); kind is "int", "float", "bool", "path", "str" or "choice"
_FIELDS: dict[str, tuple[str, float | None, float | None]] = {
    "home": ("path", None, None),
    "data": ("str", None, None),
    "cpu_slots": ("int", 1, None),
    "gpu_slots": ("int", 1, None),
    "worker_threads": ("int", 1, None),
    "max_queue": ("int", 1, None),
    "max_per_owner": ("int", 1, None),
    "max_epochs": ("int", 1, None),
    "max_train_images": ("int", 1, None),
    "max_image_epochs_per_run": ("int", 1, None),
    "max_image_epochs_per_owner": ("int", 1, None),
    "max_num_workers": ("int", 0, None),
    "max_timing_seconds": ("float", 1, None),
    "shared_view": ("bool", None, None),
    "spare_workers": ("int", 0, None),
    "heartbeat_timeout": ("float", 5, None),
    "backup_interval": ("float", 10, None),
    "worker_nice": ("int", 0, 19),
    "executor": ("choice", None, None),
    "ray_address": ("str", None, None),
    "gpu_share": ("int", 1, 16),
    "instructors": ("emails", None, None),
    "instructor_group": ("str", None, None),
    "groups_claim": ("str", None, None),
}
_CHOICES = {"executor": ("local", "ray")}
_ALIASES = {"max_per_session": "max_per_owner"}  # old name -> name; the new name wins
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


def load_settings(env: Mapping[str, str] | None = None,
                  config_file: str | os.PathLike | None = None,
                  **overrides: Any) -> Settings:
    """The settings for this process: ``overrides`` > environment > TOML file > defaults.

    ``env`` defaults to ``os.environ``; ``config_file`` to ``$CIFARLAB_CONFIG`` or
    ``./cifarlab.toml`` when present. ``overrides`` take Python values (tests use them).
    """
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
        values.update(_from_file(path))

    from_env = {}
    for name in [*_ALIASES, *_FIELDS]:  # aliases first, so that a setting's own name wins
        raw = env.get(env_name(name))
        if raw is not None and raw.strip() != "":
            field = _ALIASES.get(name, name)
            from_env[field] = _parse(field, raw, env_name(name), base=Path.cwd())
    values.update(from_env)

    for name, value in sorted(overrides.items(), key=lambda kv: kv[0] not in _ALIASES):
        field = _ALIASES.get(name, name)
        if field not in _FIELDS:
            raise SettingsError("serve.settings.unknown_setting", name=name,
                                known=", ".join(_FIELDS))
        values[field] = _parse(field, value, name, base=Path.cwd())

    cores = cpu_cores()
    values.setdefault("home", (Path.cwd() / DEFAULT_HOME).resolve())
    values.setdefault("cpu_slots", max(1, cores // 2))
    # Leave the web server a core while every CPU slot trains (workers also run niced).
    spare_core = 1 if cores > 2 else 0
    values.setdefault("worker_threads", max(1, (cores - spare_core) // values["cpu_slots"]))
    return Settings(**values)


def _from_file(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except tomllib.TOMLDecodeError as err:
        raise SettingsError("serve.settings.bad_toml", path=str(path), detail=str(err)) from None
    except OSError as err:
        raise SettingsError("serve.settings.unreadable", path=str(path),
                            detail=str(err.strerror)) from None
    table = doc["cifarlab"] if isinstance(doc.get("cifarlab"), dict) else doc
    unknown = sorted(set(table) - set(_FIELDS) - set(_ALIASES))
    if unknown:
        raise SettingsError("serve.settings.unknown_keys", path=str(path),
                            names=", ".join(unknown), known=", ".join(_FIELDS))
    base = path.resolve().parent
    out: dict[str, Any] = {}
    for name in sorted(table, key=lambda n: n not in _ALIASES):  # the setting's own name wins
        field = _ALIASES.get(name, name)
        out[field] = _parse(field, table[name], f"{name} ({path})", base=base)
    return out


def _parse(name: str, raw: Any, where: str, base: Path) -> Any:
    """``raw`` as setting ``name`` wants it; ``where`` names it in the error (the environment
    variable, the file key, or the override)."""
    kind, minimum, maximum = _FIELDS[name]
    text = raw.strip() if isinstance(raw, str) else raw
    got = repr(raw)
    if kind == "int":
        value = _int(text)
        if value is None or value < minimum or (maximum is not None and value > maximum):
            if maximum is not None:
                raise SettingsError("serve.settings.whole_number_range", field=name,
                                    where=where, min=int(minimum), max=int(maximum), got=got)
            raise SettingsError("serve.settings.whole_number", field=name, where=where,
                                min=int(minimum), got=got)
        return value
    if kind == "float":
        value = _float(text)
        if value is None or value < minimum:
            raise SettingsError("serve.settings.seconds", field=name, where=where, min=minimum,
                                got=got)
        return value
    if kind == "bool":
        if isinstance(text, bool):
            return text
        if isinstance(text, str) and text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        raise SettingsError("serve.settings.boolean", field=name, where=where, got=got)
    if kind == "choice":
        if isinstance(text, str) and text.lower() in _CHOICES[name]:
            return text.lower()
        raise SettingsError("serve.settings.choice", field=name, where=where,
                            choices=", ".join(_CHOICES[name]), got=got)
    if kind == "emails":
        return _emails(text, name, where, got)
    if kind == "path":
        if not isinstance(text, (str, os.PathLike)) or str(text) == "":
            raise SettingsError("serve.settings.folder", field=name, where=where, got=got)
        path = Path(text).expanduser()
        return (path if path.is_absolute() else base / path).resolve()
    if not isinstance(text, str):
        raise SettingsError("serve.settings.text", field=name, where=where, got=got)
    if not text and name == "groups_claim":
        return "groups"
    return text or None


def _emails(value: Any, name: str, where: str, got: str) -> tuple[str, ...]:
    """E-mails from a TOML list or one text ("a@x.edu, b@x.edu"), lower-cased, each checked
    for the one "@" an address has (a typo would otherwise leave an instructor a student)."""
    items = re.split(r"[,;\s]+", value) if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(e, str) for e in items):
        raise SettingsError("serve.settings.emails", field=name, where=where, got=got)
    out = []
    for item in (e.strip().lower() for e in items):
        if not item:
            continue
        if not _EMAIL.fullmatch(item):
            raise SettingsError("serve.settings.emails", field=name, where=where, got=repr(item))
        if item not in out:
            out.append(item)
    return tuple(out)


_EMAIL = re.compile(r"[^@\s]+@[^@\s]+")


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.lstrip("+").isdigit():
        return int(v)
    return None


def _float(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    try:
        value = float(v)
    except (TypeError, ValueError):
        return None
    return value if value == value and value not in (float("inf"), float("-inf")) else None
