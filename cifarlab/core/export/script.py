'''The runnable script that repeats a run, in the tutorial's own plain PyTorch (only torch,
torchvision and numpy: never cifarlab), rendered from ``templates/run.py.j2`` (``render``).
'''
from __future__ import annotations

import os
from pathlib import Path

from cifarlab import i18n
from cifarlab.core.config import TrainConfig
from cifarlab.core.export.record import export_error
from cifarlab.core.export.render import DEFAULT_NAME, render
from cifarlab.core.safe_text import one_line


def export_script(config: TrainConfig, source_note: str | None = None,
                  script_name: str = DEFAULT_NAME, lang: str = i18n.DEFAULT) -> str:
    """The Python source of a script that repeats ``config``'s run: ``source_note``'s lines
    (where it came from) as comments at the top, its instructions naming ``script_name``, its
    settings' comments in ``lang``. ShapeError if the network does not fit a 32×32 image."""
    return render(config, notes=str(source_note or "").splitlines(), script_name=script_name,
                  lang=lang)


def check_output(path: str | os.PathLike, default_name: str = DEFAULT_NAME) -> Path:
    """``path`` if a file can be written there: CifarLabError ``export.is_folder``,
    ``export.no_folder`` or ``export.cannot_write`` otherwise."""
    path = Path(path).expanduser()
    try:
        if path.is_dir():
            raise export_error("export.is_folder", path=path, name=default_name)
        if not path.parent.is_dir():
            raise export_error("export.no_folder", path=path, folder=path.parent)
    except OSError as err:   # a name too long for the file system, say
        raise export_error("export.cannot_write", path=path,
                           reason=err.strerror or type(err).__name__) from None
    return path


def write_output(path: Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path``; CifarLabError ``export.cannot_write`` when it cannot."""
    try:
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, encoding="utf-8")
    except OSError as err:
        raise export_error("export.cannot_write", path=path,
                           reason=err.strerror or type(err).__name__) from None
    return path


def checkpoint_note(checkpoint, name: str | None = None) -> str:
    """The comment line naming where a checkpoint's run came from, with its test accuracy."""
    note = "CIFAR Lab checkpoint" + (f" {one_line(Path(name).name)}" if name else "")
    acc = (checkpoint.results or {}).get("test_accuracy")
    if isinstance(acc, (int, float)) and not isinstance(acc, bool):
        note += f", test accuracy {100 * acc:.1f} %"
    return note

