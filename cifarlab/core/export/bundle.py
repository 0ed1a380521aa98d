"""The zip that takes a run home, in memory (the Runs page) or to a file (``python -m cifarlab
export``): one folder with the notebook, the weights, the model card and the TensorBoard logs."""
from __future__ import annotations

import io
import os
import time
import zipfile
from pathlib import Path

import torch

from cifarlab import i18n
from cifarlab.core.export.card import model_card
from cifarlab.core.export.notebook import notebook_json, source_note
from cifarlab.core.export.record import RunRecord, export_error
from cifarlab.core.export.render import export_script
from cifarlab.core.export.tensorboard import log_files

FORMATS = (".py", ".ipynb", ".zip")
DEFAULT_NAME = "cifar_run.py"   # the command line's -o, and inside a folder given as -o
LOGS = "runs"
WEIGHTS = "cifar_net.pth"


def state_dict_bytes(record: RunRecord) -> bytes:
    """The weights alone, as ``torch.save(net.state_dict(), PATH)`` writes them."""
    buf = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in record.state_dict.items()}, buf)
    return buf.getvalue()


def bundle_bytes(record: RunRecord, lang: str = i18n.DEFAULT) -> bytes:
    """The zip, in memory, all in one folder named after the run. Entries are dated by the run,
    so the same run gives the same zip (but for the TensorBoard files' own write times)."""
    notebook = f"{record.slug}.ipynb"
    files = {notebook: notebook_json(record, lang).encode("utf-8"),
             WEIGHTS: state_dict_bytes(record),
             "README.md": model_card(record, lang, notebook=notebook,
                                     logs=LOGS).encode("utf-8")}
    files |= {f"{LOGS}/{path}": data for path, data in log_files(record).items()}
    stamp = time.localtime(record.created_at or time.time())[:6]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, data in files.items():
            info = zipfile.ZipInfo(f"cifarlab-{record.slug}/{path}",
                                   date_time=max(stamp, (1980, 1, 1, 0, 0, 0)))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buf.getvalue()


def write_export(checkpoint, path: str | os.PathLike, name: str | None = None,
                 lang: str = i18n.DEFAULT) -> Path:
    """Write a loaded checkpoint's run as ``path``'s suffix names (``.py``, ``.ipynb``,
    ``.zip``); CifarLabError ``export.*`` when it cannot."""
    path = Path(path).expanduser()
    if os.path.isdir(path):   # "-o runs/": the default name in it, as cp would (os.path: a
        # name too long is simply no folder, where Path.is_dir raises)
        path = path / DEFAULT_NAME
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise export_error("export.unknown_format", path=path, suffix=suffix or "(none)",
                           known=", ".join(FORMATS))
    record = RunRecord.from_checkpoint(checkpoint, name)
    if suffix == ".py":
        data: str | bytes = export_script(record.config, source_note(record, lang),
                                          script_name=path.name, lang=lang)
    elif suffix == ".ipynb":
        data = notebook_json(record, lang)
    else:
        data = bundle_bytes(record, lang)
    try:
        path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    except OSError as err:   # a folder, a folder that is not there, a name too long ...
        raise export_error("export.cannot_write", path=path,
                           reason=err.strerror or type(err).__name__) from None
    return path
