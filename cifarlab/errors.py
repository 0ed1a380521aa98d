"""Errors a student can read.

Every error the engine raises on purpose derives from ``CifarLabError``. Its message is one
or two plain sentences that say what was wrong and how to fix it; ``field`` names the
config field or input it concerns (so a page can show it next to the right widget).
The command line prints ``str(err)`` on one line and exits non-zero; pages show it with
``st.error``. A traceback is never the only message.
"""
from __future__ import annotations


class CifarLabError(Exception):
    """Base class: a problem with the user's input, data or machine, explained in words."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self) -> str:  # one line, no class name
        return self.message


class ConfigError(CifarLabError):
    """A hyperparameter or option is out of range. ``errors`` maps field -> message."""

    def __init__(self, errors: dict[str, str]):
        self.errors = dict(errors)
        first_field = next(iter(self.errors), None)
        message = " ".join(self.errors.values()) if self.errors else "Invalid configuration."
        super().__init__(message, field=first_field)


class DataError(CifarLabError):
    """The data set could not be found, read or understood."""


class DeviceError(CifarLabError):
    """A device was asked for that this machine does not have."""


class ShapeError(CifarLabError):
    """A layer stack does not fit: some layer would produce an output smaller than 1."""

    def __init__(self, message: str, layer: str | None = None):
        super().__init__(message, field=layer)
        self.layer = layer


class CheckpointError(CifarLabError):
    """A checkpoint file is missing, torn, not ours, or not safe to load."""


class JobError(CifarLabError):
    """A training job could not be queued (queue full, per-session limit, too big a run)."""
