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
``worker_threads``     ``CIFARLAB_WORKER_THREADS``     ``max(1, cores // cpu_slots)``: PyTorch
                                                       threads (``torch.set_num_threads``) in
                                                       each run's worker process.
``max_queue``          ``CIFARLAB_MAX_QUEUE``          ``50``: runs waiting at most, all students
                                                       together; beyond it, Train says the queue
                                                       is full (it never hangs).
``max_per_session``    ``CIFARLAB_MAX_PER_SESSION``    ``2``: runs one browser session may have
                                                       queued or running at once.
``max_epochs``         ``CIFARLAB_MAX_EPOCHS``         ``20``: most epochs one run may ask for.
``max_train_images``   ``CIFARLAB_MAX_TRAIN_IMAGES``   ``50000``: most training images one run
                                                       may use (its subset, or all 50,000).
``shared_view``        ``CIFARLAB_SHARED_VIEW``        ``false``: when true (a class view),
                                                       everyone sees everyone's runs, read-only;
                                                       only the owner can cancel or delete.
``spare_workers``      ``CIFARLAB_SPARE_WORKERS``      ``1``: worker processes kept started and
                                                       warm (torch imported, data mapped) so a
                                                       run starts at once; 0 starts each cold.
``heartbeat_timeout``  ``CIFARLAB_HEARTBEAT_TIMEOUT``  ``60`` seconds: a running run whose worker
                                                       has not written a heartbeat for this long
                                                       is marked failed (or interrupted).
=====================  ==============================  ==========================================

Whole numbers must be written as such (``"4"``, not ``"4.0"`` or ``"four"``); booleans as
``true/false``, ``1/0``, ``yes/no`` or ``on/off``. A bad value raises ``SettingsError`` naming the
variable (or file key) and the value, e.g. ``CIFARLAB_CPU_SLOTS must be a whole number ≥ 1, got
'x'``.
"""
from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from cifarlab.errors import CifarLabError

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
    max_per_session: int = 2
    max_epochs: int = 20
    max_train_images: int = 50000
    shared_view: bool = False
    spare_workers: int = 1
    heartbeat_timeout: float = 60.0

    @property
    def db_path(self) -> Path:
        return self.home / DB_NAME

    @property
    def checkpoint_dir(self) -> Path:
        return self.home / "checkpoints"

    def slots_for(self, device: str) -> int:
        """How many runs may use ``device`` ("cpu", "cuda:N", "mps") at the same time."""
        if device == "cpu":
            return self.cpu_slots
        if device.startswith("cuda"):
            return self.gpu_slots
        return 1

    def replace(self, **changes: Any) -> "Settings":
        return dataclasses.replace(self, **changes)


# name -> (kind, minimum); kind is "int", "float", "bool", "path" or "str"
_FIELDS: dict[str, tuple[str, float | None]] = {
    "home": ("path", None),
    "data": ("str", None),
    "cpu_slots": ("int", 1),
    "gpu_slots": ("int", 1),
    "worker_threads": ("int", 1),
    "max_queue": ("int", 1),
    "max_per_session": ("int", 1),
    "max_epochs": ("int", 1),
    "max_train_images": ("int", 1),
    "shared_view": ("bool", None),
    "spare_workers": ("int", 0),
    "heartbeat_timeout": ("float", 5),
}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


def load_settings(env: Mapping[str, str] | None = None, config_file: str | os.PathLike | None = None,
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
            raise SettingsError(f"{CONFIG_ENV} points to '{path}', but there is no file there.")
    elif Path(DEFAULT_CONFIG_FILE).is_file():
        path = Path(DEFAULT_CONFIG_FILE)
    if path is not None:
        values.update(_from_file(path))

    for name in _FIELDS:
        raw = env.get(env_name(name))
        if raw is not None and raw.strip() != "":
            values[name] = _parse(name, raw, env_name(name), base=Path.cwd())

    for name, value in overrides.items():
        if name not in _FIELDS:
            raise SettingsError(f"Unknown setting '{name}'. Known: {', '.join(_FIELDS)}.")
        values[name] = _parse(name, value, name, base=Path.cwd())

    cores = cpu_cores()
    values.setdefault("home", (Path.cwd() / DEFAULT_HOME).resolve())
    values.setdefault("cpu_slots", max(1, cores // 2))
    values.setdefault("worker_threads", max(1, cores // values["cpu_slots"]))
    return Settings(**values)


def _from_file(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except tomllib.TOMLDecodeError as err:
        raise SettingsError(f"'{path}' is not valid TOML: {err}.") from None
    except OSError as err:
        raise SettingsError(f"'{path}' could not be read: {err.strerror}.") from None
    table = doc["cifarlab"] if isinstance(doc.get("cifarlab"), dict) else doc
    unknown = sorted(set(table) - set(_FIELDS))
    if unknown:
        raise SettingsError(f"'{path}' has unknown setting(s): {', '.join(unknown)}. "
                            f"Known: {', '.join(_FIELDS)}.")
    base = path.resolve().parent
    return {name: _parse(name, value, f"{name} in {path}", base=base)
            for name, value in table.items() if name in _FIELDS}


def _parse(name: str, raw: Any, where: str, base: Path) -> Any:
    kind, minimum = _FIELDS[name]
    text = raw.strip() if isinstance(raw, str) else raw
    if kind == "int":
        value = _int(text)
        if value is None or (minimum is not None and value < minimum):
            raise SettingsError(f"{where} must be a whole number ≥ {int(minimum)}, got {raw!r}.",
                                field=name)
        return value
    if kind == "float":
        value = _float(text)
        if value is None or (minimum is not None and value < minimum):
            raise SettingsError(f"{where} must be a number of seconds ≥ {minimum:g}, got {raw!r}.",
                                field=name)
        return value
    if kind == "bool":
        if isinstance(text, bool):
            return text
        if isinstance(text, str) and text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        raise SettingsError(f"{where} must be true or false, got {raw!r}.", field=name)
    if kind == "path":
        if not isinstance(text, (str, os.PathLike)) or str(text) == "":
            raise SettingsError(f"{where} must be a folder path, got {raw!r}.", field=name)
        path = Path(text).expanduser()
        return (path if path.is_absolute() else base / path).resolve()
    if not isinstance(text, str):
        raise SettingsError(f"{where} must be text, got {raw!r}.", field=name)
    return text or None


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
