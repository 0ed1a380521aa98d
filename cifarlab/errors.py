"""Errors as a catalog code (``errors.<code>``) and parameters: ``err.text(lang)``, ``str(err)``."""
from __future__ import annotations

from dataclasses import dataclass, field as dc_field
from typing import Any, Iterable, Mapping

from cifarlab import i18n


def _render(code: str, params: Mapping[str, Any], lang: str) -> str:
    # a parameter with a text of its own (a knob's label, a Problem): in the message's language
    params = {k: v.text(lang) if callable(getattr(v, "text", None)) else v
              for k, v in params.items()}
    return i18n.t(f"errors.{code}", lang, **params)


class CifarLabError(Exception):
    """A problem with the user's input, data or machine; ``field`` names the input concerned."""

    def __init__(self, code: str, /, field: str | None = None, **params: Any):
        super().__init__(code)
        self.code = code
        self.field = field
        self.params = params

    def text(self, lang: str = i18n.DEFAULT) -> str:
        return _render(self.code, self.params, lang)

    def __str__(self) -> str:
        return self.text(i18n.DEFAULT)

    def __reduce__(self):  # survives pickling between processes (workers -> queue): no __init__
        return type(self).__new__, (type(self), self.code), self.__dict__.copy()


@dataclass(frozen=True)
class Problem:
    """One bad value: its field, a code below ``errors.``, parameters."""

    field: str
    code: str
    params: Mapping[str, Any] = dc_field(default_factory=dict)

    def text(self, lang: str = i18n.DEFAULT) -> str:
        return _render(self.code, self.params, lang)


class ConfigError(CifarLabError):
    """One or more hyperparameters are out of range; ``problems`` lists each."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems: list[Problem] = list(problems)
        first = self.problems[0] if self.problems else Problem("config", "config.invalid")
        super().__init__(first.code, field=first.field, **dict(first.params))

    def texts(self, lang: str = i18n.DEFAULT) -> dict[str, str]:
        """field -> message in ``lang``, the first problem of each field."""
        out: dict[str, str] = {}
        for p in self.problems:
            out.setdefault(p.field, p.text(lang))
        return out

    def text(self, lang: str = i18n.DEFAULT) -> str:
        return " ".join(self.texts(lang).values())


class DataError(CifarLabError):
    """The data set could not be found, read or understood."""


class DeviceError(CifarLabError):
    """A device was asked for that this machine does not have."""


class ShapeError(CifarLabError):
    """A layer stack does not fit: some layer's output would be smaller than 1."""

    def __init__(self, code: str, /, layer: str | None = None, **params: Any):
        super().__init__(code, field=layer, layer=layer, **params)
        self.layer = layer


class CheckpointError(CifarLabError):
    """A checkpoint file is missing, torn, not ours, too large, or not safe to load."""


class JobError(CifarLabError):
    """A run could not be queued."""


class UploadError(CifarLabError):
    """An uploaded file was refused."""


# The run store unreachable now (mid-lesson) or at start: the pages say both in one message.
STORE_UNREACHABLE = "serve.store.unreachable"
STORE_DOWN_CODES = frozenset({"serve.store.down", STORE_UNREACHABLE})
STORE_DOWN_KEY = "errors." + STORE_UNREACHABLE
