"""A timing result: rows + what they were measured on; JSON and CSV with an exact round trip,
typed through pandas' nullable dtypes (a value of the wrong kind is refused as read)."""
from __future__ import annotations

import io
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cifarlab.core.config import PIPELINES
from cifarlab.core.safe_text import csv_cell, csv_value
from cifarlab.errors import CifarLabError, DataError, UploadError
from cifarlab.lab.gpu.config import DEVICE_RE

THIS_MACHINE = "this machine"
OOM = "out of memory"
FORMAT = "cifarlab-timing"
FORMAT_VERSION = 1
RESULTS_DIR = Path(__file__).resolve().parents[3] / "docs" / "gpu-results"
MAX_UPLOAD_BYTES = 5 * 2**20   # a result file; larger uploads are refused in words
UPLOADER_MB = MAX_UPLOAD_BYTES // 2**20 + 1   # the widget lets a little more through: ours refuses
SUFFIXES = (".json", ".csv")
# What a result file may hold (a real one: 4 deep, a few hundred rows, 37 columns)
MAX_DEPTH = 32
MAX_ROWS = 10_000
MAX_COLUMNS = 256   # pandas takes minutes over a header of 10⁶ columns

log = logging.getLogger("cifarlab.lab.gpu")

# One row per point; read back, an empty int/float is None, str "" and bool False
COLUMNS: dict[str, type] = {
    "device": str, "device_kind": str, "device_name": str, "device_memory_bytes": int,
    "pipeline": str, "batch_size": int, "width": int, "params": int, "tutorial_point": bool,
    "num_workers": int,
    "steps": int, "repeats": int, "timed_steps": int, "budget_hit": bool,
    "warmup_steps": int, "warmup_s": float, "first_step_ms": float, "setup_s": float,
    "step_ms": float, "step_ms_min": float, "step_ms_max": float,
    "images_per_s": float, "images_per_s_min": float, "images_per_s_max": float,
    "epoch_s": float,
    "peak_memory_bytes": int, "loss": float, "load_1m": float, "error": str,
    "host": str, "recorded_at": str, "torch": str, "cuda": str,
    "graphed": bool,   # the step replayed as one CUDA graph (the "GPU, graphed" series)
}
PHASES = ("data", "h2d", "forward", "backward", "optimizer")
BREAKDOWN_COLUMNS: dict[str, type] = {
    "pass": str, "method": str, "device": str, "device_name": str, "pipeline": str,
    "batch_size": int, "width": int, "num_workers": int, "steps": int,
    **{f"{p}_s": float for p in PHASES}, "total_s": float, "step_s": float, "error": str,
    "host": str, "recorded_at": str,
}
_DTYPES = {int: "Int64", float: "Float64", str: "string", bool: "boolean"}
_EMPTY = {str: "", bool: False}   # an empty cell's value by type; None for numbers


def blank(columns: dict[str, type]) -> dict:
    return {c: _EMPTY.get(t) for c, t in columns.items()}


def frame(rows: list[dict], columns: dict[str, type]):
    import pandas as pd

    df = pd.DataFrame.from_records(list(rows), columns=list(columns))
    return df.astype({c: _DTYPES[t] for c, t in columns.items()})


def records(df, columns: dict[str, type]) -> list[dict]:
    """A typed DataFrame back to plain rows ("" / False / None where empty)."""
    import pandas as pd

    # pandas' NA may read back as None, NA or NaN
    return [{c: _EMPTY.get(t) if (v := rec.get(c)) is None or pd.isna(v) else t(v)
             for c, t in columns.items()} for rec in df.to_dict("records")]


def _typed(rows: Any, columns: dict[str, type], source: str) -> list[dict]:
    try:
        return records(frame(rows, columns), columns)
    except (TypeError, ValueError, AttributeError, KeyError, OverflowError):
        raise DataError("gpu.bad_value", source=source) from None


def _too_deep(value: Any, depth: int = MAX_DEPTH) -> bool:
    """Whether JSON nests past ``depth`` (json.loads takes more than a page can write back)."""
    if isinstance(value, dict):
        value = list(value.values())
    return isinstance(value, list) and (depth == 0 or any(_too_deep(v, depth - 1) for v in value))


def _parse_json(text: str | bytes, source: str, code: str) -> Any:
    """JSON text parsed, or DataError ``code``: damaged, too deep, or a huge integer."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    if value is None or _too_deep(value):
        raise DataError(code, source=source)
    return value


def check_suffix(path: str | Path) -> Path:
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise CifarLabError("gpu.file_type", field="out", name=path.name)
    return path


@dataclass
class SweepResult:
    rows: list[dict]
    environment: dict
    config: dict
    host: str
    recorded_at: str                       # ISO 8601, UTC
    breakdowns: list[dict] = field(default_factory=list)
    cancelled: bool = False
    source: str = THIS_MACHINE             # "this machine", or the file it was loaded from

    @property
    def recorded_elsewhere(self) -> bool:
        return self.source != THIS_MACHINE

    def ok_rows(self) -> list[dict]:
        return [r for r in self.rows if not r["error"]]

    def check(self) -> SweepResult:
        """Itself when every row can be shown; DataError naming the first that cannot."""
        if not self.rows:
            raise DataError("gpu.no_rows", source=self.source)
        for n, r in enumerate(self.rows, start=1):
            if not (DEVICE_RE.match(r["device"]) and r["pipeline"] in PIPELINES
                    and r["batch_size"] and r["width"]) or (
                    not r["error"] and not (r["images_per_s"] and r["images_per_s"] > 0
                                            and r["step_ms"] is not None)):
                raise DataError("gpu.bad_row", source=self.source, n=n)
        return self

    def to_dict(self) -> dict:
        return {"format": FORMAT, "version": FORMAT_VERSION, "host": self.host,
                "recorded_at": self.recorded_at, "cancelled": self.cancelled,
                "environment": self.environment, "config": self.config,
                "rows": self.rows, "breakdowns": self.breakdowns}

    @classmethod
    def from_dict(cls, d: Any, source: str = THIS_MACHINE) -> SweepResult:
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise DataError("gpu.not_a_result", source=source)
        if not isinstance(d.get("version", 0), int) or d.get("version", 0) > FORMAT_VERSION:
            raise DataError("gpu.newer_format", source=source)
        env, cfg = d.get("environment") or {}, d.get("config") or {}
        rows, breakdowns = d.get("rows") or [], d.get("breakdowns") or []
        if not (isinstance(env, dict) and isinstance(cfg, dict) and isinstance(rows, list)
                and isinstance(breakdowns, list)
                and all(isinstance(r, dict) for r in rows + breakdowns)):
            raise DataError("gpu.bad_value", source=source)
        if len(rows) + len(breakdowns) > MAX_ROWS:
            raise DataError("gpu.too_many_rows", source=source, limit=MAX_ROWS)
        return cls(rows=_typed(rows, COLUMNS, source),
                   breakdowns=_typed(breakdowns, BREAKDOWN_COLUMNS, source),
                   environment=env, config=cfg, host=str(d.get("host") or ""),
                   recorded_at=str(d.get("recorded_at") or ""),
                   cancelled=bool(d.get("cancelled", False)), source=source)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, allow_nan=False)

    @classmethod
    def from_json_text(cls, text: str | bytes, source: str = "recorded") -> SweepResult:
        return cls.from_dict(_parse_json(text, source, "gpu.not_json"), source=source)

    # -- CSV: a first line "# cifarlab-timing {json}" keeps everything but the rows
    def to_csv(self) -> str:
        meta = {k: v for k, v in self.to_dict().items() if k != "rows"}
        buf = io.StringIO()
        buf.write(f"# {FORMAT} {json.dumps(meta, allow_nan=False)}\n")
        rows = [{c: csv_cell(v) for c, v in r.items()} for r in self.rows]  # text, no formula
        frame(rows, COLUMNS).to_csv(buf, index=False, lineterminator="\n")
        return buf.getvalue()

    @classmethod
    def from_csv_text(cls, text: str | bytes, source: str = "recorded") -> SweepResult:
        import pandas as pd

        if isinstance(text, bytes):   # not text at all: no columns of ours, said below
            text = text.decode("utf-8", errors="replace")
        meta: dict = {"format": FORMAT}
        if text.startswith(f"# {FORMAT} "):
            first, _, text = text.partition("\n")
            meta = _parse_json(first[len(FORMAT) + 3:], source, "gpu.csv_header_damaged")
        if text.partition("\n")[0].count(",") >= MAX_COLUMNS:
            raise DataError("gpu.too_many_columns", source=source, limit=MAX_COLUMNS)
        if text.count("\n") > MAX_ROWS + 1:
            raise DataError("gpu.too_many_rows", source=source, limit=MAX_ROWS)
        try:  # typed as it is read: pandas parses floats back exactly
            df = pd.read_csv(io.StringIO(text), dtype={c: _DTYPES[t] for c, t in COLUMNS.items()},
                             keep_default_na=False, na_values=[""])
            rows = records(df.reindex(columns=list(COLUMNS)), COLUMNS)
        except pd.errors.EmptyDataError:
            df, rows = pd.DataFrame(), []
        except (ValueError, TypeError, OverflowError):  # pandas' parser errors are ValueErrors
            raise DataError("gpu.bad_value", source=source) from None
        if not {"device", "batch_size", "width"} <= set(df.columns):
            raise DataError("gpu.csv_no_columns", source=source)
        rows = [{c: csv_value(v) for c, v in r.items()} for r in rows]
        if isinstance(meta, dict):
            meta["rows"] = rows
            if not meta.get("host") and rows:
                meta["host"], meta["recorded_at"] = rows[0]["host"], rows[0]["recorded_at"]
        return cls.from_dict(meta, source=source)

    def save(self, path: str | Path) -> Path:
        from cifarlab.core.checkpoint import atomic_write_bytes  # imports torch: only when saving

        path = check_suffix(path)
        text = self.to_csv() if path.suffix.lower() == ".csv" else self.to_json()
        atomic_write_bytes(path, lambda f: f.write(text.encode("utf-8")))
        return path

    @classmethod
    def load(cls, path: str | Path) -> SweepResult:
        path = check_suffix(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            raise DataError("gpu.cannot_read", path=str(path)) from None
        read = cls.from_csv_text if path.suffix.lower() == ".csv" else cls.from_json_text
        return read(text, source=str(path))


def load_upload(name: str, data: bytes) -> SweepResult:
    """A result from an uploaded .json or .csv, checked row by row; UploadError or DataError."""
    suffix = Path(name).suffix.lower()
    if suffix not in SUFFIXES:
        raise UploadError("gpu.upload_type", field="upload", name=name)
    if len(data) > MAX_UPLOAD_BYTES:
        raise UploadError("gpu.upload_too_big", field="upload", name=name,
                          mb=MAX_UPLOAD_BYTES // 2**20)
    read = SweepResult.from_csv_text if suffix == ".csv" else SweepResult.from_json_text
    try:
        return read(data, source=name).check()
    except CifarLabError:
        raise
    except Exception:  # a case the checks above missed: words on the page,
        log.warning("timing upload %r could not be read", name, exc_info=True)  # details here
        raise DataError("gpu.bad_value", source=name) from None


def recordings_stamp() -> tuple:
    """docs/gpu-results and its JSON files' modification times: a cache key."""
    files = sorted(RESULTS_DIR.glob("*.json"))
    return str(RESULTS_DIR), tuple((p.name, p.stat().st_mtime_ns) for p in files)


def recorded_results(folder: str | Path | None = None) -> list[SweepResult]:
    """The results recorded in docs/gpu-results (JSON) that can be shown, newest first."""
    results = []
    for path in sorted(Path(folder or RESULTS_DIR).glob("*.json")):
        try:
            results.append(SweepResult.load(path).check())
        except CifarLabError:
            continue
    return sorted(results, key=lambda r: r.recorded_at, reverse=True)

