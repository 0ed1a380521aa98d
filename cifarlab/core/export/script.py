'''The runnable script that repeats a run, in the tutorial's own plain PyTorch (only torch,
torchvision and numpy: never cifarlab). The code comes from ``pieces`` (shared with the
notebook); this module adds the script's docstring, its settings and its ``__main__`` guard.

    text = export_script(config, source_note="run 3f2a… on the lab server")
    write_script("cifar_run.py", config)      # the same, its instructions naming that file
    export_checkpoint(checkpoint.load("cifar_net.pth"), "cifar_run.py")   # a checkpoint's run
'''
from __future__ import annotations

import ast
import dataclasses
import datetime as _dt
import os
import pprint
import textwrap
from pathlib import Path

from cifarlab import i18n
from cifarlab.core.config import TrainConfig, knobs
from cifarlab.core.export import pieces
from cifarlab.core.export.pieces import TUTORIAL_URL
from cifarlab.core.export.tricks_code import trick_parts, used_fields
from cifarlab.errors import CifarLabError

DEFAULT_NAME = "cifar_run.py"
# The tutorial's own names for its constants; every other field is written as NAME.upper()
CONSTANT_NAMES = {"lr": "LEARNING_RATE"}
# Fields the script's code reads; any other field is written down and marked as not used
_USED = {"epochs", "lr", "momentum", "batch_size", "num_workers", "device", "pipeline", "seed",
         "train_subset", "shuffle", "model", "log_every", "cuda_graphs"}
_MODEL_NOTE = "The network's shape (written out as class Net below: edit Net to change it)."

_DOCSTRING = '''\
"""Train a CIFAR-10 classifier: PyTorch's tutorial "Training a Classifier", with these settings:
<<describe>>.

<<url>>
Exported by CIFAR Lab on <<date>>; it needs only torch and torchvision. Run it with
``python <<script>>`` to download CIFAR-10 into ./data as the tutorial does, or, on a machine
without internet, ``python <<script>> DATA`` where DATA is an image folder or a .tar.gz holding
train/<class>/ and test/<class>/ (or set CIFARLAB_DATA to it).
"""
'''
_MAIN = "if __name__ == '__main__':  # needed for NUM_WORKERS > 0 on macOS and Windows\n"


def code_parts(config: TrainConfig, source_note: str | None = None) -> dict[str, str]:
    """What the pieces' ``<<name>>`` marks stand for in this run (script and notebook)."""
    net = pieces.net_source(config)  # first: a ShapeError before anything else
    return {"describe": describe(config), "url": TUTORIAL_URL,
            "date": _dt.date.today().isoformat(), "notes": _notes(source_note),
            "settings": settings_block(config), "net": net} | trick_parts(config)


def export_script(config: TrainConfig, source_note: str | None = None,
                  script_name: str = DEFAULT_NAME) -> str:
    """The Python source of a script that repeats ``config``'s run.

    ``source_note``: a line or two about where it came from (run id, date, accuracy), written
    as comments at the top. ``script_name``: the file name the script will be saved as (its
    instructions say ``python <script_name>``). Raises ShapeError if the network does not fit
    a 32×32 image.
    """
    if not isinstance(config, TrainConfig):
        raise TypeError("export_script needs a TrainConfig")
    parts = code_parts(config, source_note) | {"script": _one_line(script_name)}
    top = [pieces.fill(code, parts) for _, code in pieces.DEFINITIONS]
    run = [pieces.fill(code, parts) for _, code in
           (("source", pieces.SCRIPT_SOURCE),) + pieces.RUN]
    head = pieces.fill(_DOCSTRING, parts)
    # the tutorial's layout: two blank lines around the definitions, one inside the run
    body = top[0] + "\n" + top[1] + "\n" + "\n".join(top[2:4]) + "\n\n" + "\n\n".join(top[4:])
    main = _MAIN + textwrap.indent(run[0] + "\n".join(run[1:]), "    ")
    return head + body + "\n\n" + main


def constant_name(field_name: str) -> str:
    """The script's constant for a config field: the tutorial's name, else NAME.upper()."""
    return CONSTANT_NAMES.get(field_name, field_name.upper())


def settings_block(config: TrainConfig) -> str:
    """One constant per field of the config (in the dataclass's order), each under a comment:
    its knob's help (English), so a field added to TrainConfig appears here by itself."""
    helps = {f.name: i18n.t(f.knob.help, "en") + (
        " One of: " + ", ".join(map(repr, f.knob.choices)) + "." if f.knob.choices else "")
        for f in knobs(type(config))}
    helps.setdefault("model", _MODEL_NOTE)
    lines: list[str] = []
    for f in dataclasses.fields(config):
        name = constant_name(f.name)
        comment = helps.get(f.name, "")
        if f.name not in _USED | used_fields(config):
            comment = (comment + " " if comment else "") + (
                "(A CIFAR Lab setting that this script does not use.)")
        lines += [f"# {line}" for line in textwrap.wrap(comment, 93)]
        lines.append(f"{name} = {_literal(getattr(config, f.name), len(name) + 3)}")
    return "\n".join(lines)


def _literal(value, indent: int) -> str:
    """``value`` as Python source (a ModelSpec as its dict), wrapped to fit 95 columns."""
    value = value.to_dict() if hasattr(value, "to_dict") else value
    text = pprint.pformat(value, width=95 - indent, sort_dicts=False)
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError):  # something without a literal: write its text
        return repr(str(value))
    return text.replace("\n", "\n" + " " * indent)


def check_output(path: str | os.PathLike, default_name: str = DEFAULT_NAME) -> Path:
    """``path`` if a file can be written there: CifarLabError ``export.is_folder`` or
    ``export.no_folder`` otherwise."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise CifarLabError("export.is_folder", field="output", path=str(path),
                            name=default_name)
    if not path.parent.is_dir():
        raise CifarLabError("export.no_folder", field="output", path=str(path),
                            folder=str(path.parent))
    return path


def write_output(path: Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path``; CifarLabError ``export.cannot_write`` when it cannot."""
    try:
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, encoding="utf-8")
    except OSError as err:
        raise CifarLabError("export.cannot_write", field="output", path=str(path),
                            reason=err.strerror or type(err).__name__) from None
    return path


def write_script(path: str | os.PathLike, config: TrainConfig,
                 source_note: str | None = None) -> Path:
    """Write ``export_script(config, ...)`` to ``path`` (its instructions name that file).

    CifarLabError (``export.no_folder``, ``export.is_folder``, ``export.cannot_write``) when
    the folder is missing, the path is a folder, or the file cannot be written.
    """
    path = check_output(path)
    return write_output(path, export_script(config, source_note=source_note,
                                            script_name=path.name))


def checkpoint_note(checkpoint, name: str | None = None) -> str:
    """The comment line naming where a checkpoint's run came from, with its test accuracy."""
    note = "CIFAR Lab checkpoint" + (f" {Path(name).name}" if name else "")
    acc = (checkpoint.results or {}).get("test_accuracy")
    if isinstance(acc, (int, float)) and not isinstance(acc, bool):
        note += f", test accuracy {100 * acc:.1f} %"
    return note


def require_run(checkpoint, name: str | None = None) -> None:
    """A plain state_dict (the tutorial's own ``cifar_net.pth``) holds no run settings:
    CifarLabError ``export.weights_only``."""
    if getattr(checkpoint, "plain", False):
        raise CifarLabError("export.weights_only", field="checkpoint",
                            name=Path(name).name if name else "")


def export_checkpoint(checkpoint, path: str | os.PathLike, name: str | None = None) -> Path:
    """Write the script that repeats a loaded checkpoint's run (``core.checkpoint.load``).

    A plain state_dict holds no run settings: CifarLabError ``export.weights_only``.
    """
    require_run(checkpoint, name)
    return write_script(path, checkpoint.config, checkpoint_note(checkpoint, name))


def _one_line(text: str) -> str:
    return " ".join("".join(ch if ch.isprintable() else " " for ch in str(text)).split())


def _notes(source_note: str | None) -> str:
    lines = [_one_line(line) for line in str(source_note or "").splitlines()]
    return "".join(f"# {line}\n" for line in lines if line) + ("\n" if source_note else "")


def describe(config: TrainConfig) -> str:
    net = "the tutorial's network" if config.model.is_tutorial else "the network of MODEL"
    return "\n".join(textwrap.wrap(f"{config.describe()}, {net}", 95))
