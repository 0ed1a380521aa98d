"""What the Results and Runs pages show: a finished run's model, its predictions and mistakes,
per-class accuracy over the epochs, a student's own photo classified, and runs side by side.

    model, ckpt = load_run_model(store, run)          # the run's checkpoint, weights_only
    ev = predictions_for(model, data)                  # EvalResult over the 10,000 test images
    confused_examples(ev, "cat", "dog", limit=12)      # test images: true cat, answered dog
    per_class_by_epoch(store.events(run.id, ["epoch"]))  # DataFrame: epoch, class, accuracy
    classify_image(model, png_bytes, ckpt.classes)     # [("cat", 0.61), ("dog", 0.22), ...]
    runs_table(runs); differing_columns(df, KNOB_COLUMNS)

Never imports streamlit. Every refusal is a ``CifarLabError`` whose message a student can read;
image problems raise ``ImageError`` with a ``code`` (and ``params``) so a page can show the
message in the student's language.
"""
from __future__ import annotations

import io
import math
import warnings
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from cifarlab.core.checkpoint import Checkpoint, load as load_checkpoint
from cifarlab.core.config import ModelSpec, TrainConfig
from cifarlab.errors import CheckpointError, CifarLabError
from cifarlab.core.evaluate import EvalResult, evaluate, predict

__all__ = [
    "TUTORIAL_REFERENCE", "MAX_CHECKPOINT_BYTES", "MAX_IMAGE_BYTES", "MAX_IMAGE_PIXELS",
    "KNOB_COLUMNS", "ImageError", "PreparedImage",
    "load_run_model", "load_uploaded_checkpoint", "predictions_for", "confused_examples",
    "most_confused_pair", "sample_predictions", "per_class_by_epoch", "prepare_image",
    "classify_image", "classify_prepared", "upscale", "state_dict_bytes", "runs_table",
    "differing_columns", "loss_curves", "model_label",
]

# The PyTorch tutorial's printed figures: 54 % overall after 2 epochs; per class they swing
# widely from run to run (two runs of the tutorial: bird 21-38 %, ship 61-81 %).
TUTORIAL_REFERENCE: dict[str, Any] = {
    "accuracy": 0.54,
    "per_class_ranges": {"bird": (0.21, 0.38), "ship": (0.61, 0.81)},
    "chance": 0.10,
}

MAX_CHECKPOINT_BYTES = 64 * 1024 * 1024   # the tutorial's Net is 250 kB; width 16 is ~40 MB
MAX_IMAGE_BYTES = 20 * 1024 * 1024
MAX_IMAGE_PIXELS = 40_000_000             # a 40-megapixel photo; beyond it: refused, not decoded
PREVIEW_SIZE = 256


# --------------------------------------------------------------------------------- models

def load_run_model(store, run) -> tuple[torch.nn.Module, Checkpoint]:
    """The model a run saved (its checkpoint at the store's validated path), on the CPU."""
    path = store.checkpoint_path(run.id)   # validates the id: nothing else becomes a path
    if not path.is_file():
        raise CheckpointError("This run has no saved model (it may have failed before the end "
                              "of its first step, or its checkpoint was deleted).")
    ckpt = load_checkpoint(path, map_location="cpu")
    return ckpt.model().eval(), ckpt


def load_uploaded_checkpoint(data: bytes, name: str = "checkpoint.pth",
                             max_bytes: int = MAX_CHECKPOINT_BYTES
                             ) -> tuple[torch.nn.Module, Checkpoint]:
    """A checkpoint file a student uploaded (ours, or the tutorial's plain ``state_dict``),
    loaded with ``weights_only=True``: a pickle with code in it, a text file or a torn file is
    refused with a ``CheckpointError``."""
    if len(data) > max_bytes:
        raise CheckpointError(f"'{name}' is {len(data) / 2**20:.0f} MB; checkpoints over "
                              f"{max_bytes // 2**20} MB are not accepted here.")
    if not data:
        raise CheckpointError(f"'{name}' is empty.")
    buf = io.BytesIO(data)
    buf.name = name
    ckpt = load_checkpoint(buf, map_location="cpu")
    return ckpt.model().eval(), ckpt


def predictions_for(model: torch.nn.Module, data, device="cpu") -> EvalResult:
    """Every test image's class probabilities, the confusion matrix and accuracies."""
    out_features = getattr(getattr(model, "fc3", None), "out_features", None)
    if out_features is not None and out_features != len(data.classes):
        raise CheckpointError(f"This model answers with {out_features} classes, but the test "
                              f"images here have {len(data.classes)}: it was trained on other "
                              "data.")
    return evaluate(model, data, device)


def confused_examples(ev: EvalResult, true_cls: int | str, pred_cls: int | str,
                      limit: int = 24) -> np.ndarray:
    """Indices of test images of class ``true_cls`` that the model called ``pred_cls``, the
    most confident answers first. ``true_cls == pred_cls`` gives correctly classified ones."""
    t, p = _class_index(ev.classes, true_cls), _class_index(ev.classes, pred_cls)
    idx = np.flatnonzero((ev.labels == t) & (ev.predictions == p))
    if len(idx) == 0:
        return idx
    conf = ev.probabilities[idx, p]
    order = np.argsort(-conf, kind="stable")
    return idx[order][:max(0, int(limit))]


def most_confused_pair(confusion: Sequence[Sequence[int]]) -> tuple[int, int]:
    """(true, predicted) of the largest off-diagonal cell; (0, 0) when there are no mistakes."""
    m = np.array(confusion, dtype=np.int64)
    if m.size == 0:
        return (0, 0)
    np.fill_diagonal(m, -1)
    i, j = np.unravel_index(int(np.argmax(m)), m.shape)
    return (int(i), int(j)) if m[i, j] > 0 else (0, 0)


def sample_predictions(ev: EvalResult, n: int = 16, seed: int = 0) -> pd.DataFrame:
    """``n`` test images picked at random (repeatably, by ``seed``): index, true, predicted,
    confidence (the probability of the predicted class), correct."""
    n = max(0, min(int(n), ev.total))
    idx = np.sort(np.random.default_rng(seed).choice(ev.total, size=n, replace=False))
    pred = ev.predictions[idx]
    return pd.DataFrame({
        "index": idx.astype(int),
        "true": [ev.classes[i] for i in ev.labels[idx]],
        "predicted": [ev.classes[i] for i in pred],
        "confidence": ev.probabilities[idx, pred].astype(float),
        "correct": ev.labels[idx] == pred,
    })


def per_class_by_epoch(events: Iterable[Any]) -> pd.DataFrame:
    """Per-class accuracy after each epoch, long format: columns epoch, class, accuracy (0..1).

    ``events``: the run's events (``RunEvent`` or ``{"kind", "data"}`` dicts; only "epoch" ones
    count) or the epoch summaries themselves (dicts with "epoch" and "per_class_accuracy", as
    in ``result["epochs"]``). Epochs evaluated without per-class figures are left out; an empty
    frame (same columns) when there are none.
    """
    rows = []
    for item in events or ():
        kind, data = _event_parts(item)
        if kind not in (None, "epoch") or not isinstance(data, Mapping):
            continue
        per_class = data.get("per_class_accuracy")
        epoch = data.get("epoch")
        if not isinstance(per_class, Mapping) or epoch is None:
            continue
        for cls, acc in per_class.items():
            if isinstance(acc, (int, float)) and math.isfinite(acc):
                rows.append({"epoch": int(epoch), "class": str(cls), "accuracy": float(acc)})
    df = pd.DataFrame(rows, columns=["epoch", "class", "accuracy"])
    return df.drop_duplicates(["epoch", "class"], keep="last").reset_index(drop=True)


def _event_parts(item: Any) -> tuple[str | None, Any]:
    if hasattr(item, "kind") and hasattr(item, "data"):
        return item.kind, item.data
    if isinstance(item, Mapping) and "kind" in item and "data" in item:
        return item["kind"], item["data"]
    return None, item


def _class_index(classes: Sequence[str], cls: int | str) -> int:
    if isinstance(cls, (int, np.integer)) and 0 <= int(cls) < len(classes):
        return int(cls)
    if isinstance(cls, str) and cls in classes:
        return list(classes).index(cls)
    raise CifarLabError(f"{cls!r} is not one of the classes ({', '.join(classes)}).",
                        field="class")


# ---------------------------------------------------------------------------------- images

class ImageError(CifarLabError):
    """An uploaded picture that cannot be classified. ``code``: not_image | too_big_bytes |
    too_many_pixels | broken | odd_mode | empty; ``params`` fill the page's message."""

    def __init__(self, code: str, message: str, **params: Any):
        super().__init__(message, field="image", **params)
        self.code = code
        self._english = message

    def text(self, lang: str = "en") -> str:  # the page renders results.image_* itself
        return self._english


@dataclass
class PreparedImage:
    """A picture as the network sees it: 32×32 RGB (HWC uint8), and how it got there."""

    pixels: np.ndarray                  # 32×32×3 uint8
    preview: np.ndarray                 # the original, at most PREVIEW_SIZE on a side, RGB
    original_size: tuple[int, int]      # (width, height)
    format: str                         # "PNG", "JPEG", ...
    mode: str                           # the original's PIL mode: "RGB", "CMYK", "I;16", ...
    notes: list[tuple[str, dict]] = field(default_factory=list)  # (code, params) for the page

    def tensor(self) -> torch.Tensor:
        """1×3×32×32 uint8, ready for ``evaluate.predict``."""
        return torch.from_numpy(np.ascontiguousarray(self.pixels.transpose(2, 0, 1)))[None]


_ALPHA_MODES = {"RGBA", "LA", "PA", "RGBa", "La"}
_WIDE_MODES = {"I", "F", "I;16", "I;16B", "I;16L", "I;16N"}


def prepare_image(file_bytes: bytes, max_pixels: int = MAX_IMAGE_PIXELS,
                  max_bytes: int = MAX_IMAGE_BYTES, size: int = 32) -> PreparedImage:
    """Decode an uploaded picture safely and shrink it to ``size``×``size`` RGB.

    Refused with ``ImageError``: not an image, over ``max_bytes``, more than ``max_pixels``
    pixels (checked from the header, before anything is decoded: a decompression bomb never
    gets decoded), a torn file. Converted, with a note: CMYK and other colour modes, 16-bit and
    float images (scaled to 8 bits), transparency (laid over white), an animation (its first
    frame), an EXIF rotation; a non-square picture is cropped to its centre square.
    """
    from PIL import Image, ImageOps, UnidentifiedImageError

    if not file_bytes:
        raise ImageError("empty", "The file is empty.")
    if len(file_bytes) > max_bytes:
        raise ImageError("too_big_bytes", f"That file is over {max_bytes / 2**20:.0f} MB. "
                         "Please upload a smaller image.", max_mb=f"{max_bytes / 2**20:.0f}")
    notes: list[tuple[str, dict]] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            img = Image.open(io.BytesIO(file_bytes))
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise ImageError("too_many_pixels", "That picture has far too many pixels to "
                             "open safely.", max_mp=f"{max_pixels / 1e6:.0f}") from None
        except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
            raise ImageError("not_image", "That file is not an image we can read. Please upload "
                             "a PNG or JPEG.") from None
        width, height = img.size
        if width < 1 or height < 1:
            raise ImageError("broken", "That image has no pixels.")
        if width * height > max_pixels:
            raise ImageError("too_many_pixels", f"That picture is {width}×{height} pixels, more "
                             f"than the {max_pixels / 1e6:.0f} megapixels accepted here.",
                             width=width, height=height, max_mp=f"{max_pixels / 1e6:.0f}")
        fmt, mode = img.format or "?", img.mode
        frames = getattr(img, "n_frames", 1) or 1
        try:
            if frames > 1:
                img.seek(0)
                notes.append(("first_frame", {"n": int(frames)}))
            if img.format == "JPEG":
                img.draft("RGB", (max(size, PREVIEW_SIZE), max(size, PREVIEW_SIZE)))
            img.load()
            rgb = _to_rgb(img, notes)
            rotated = ImageOps.exif_transpose(rgb)
            if rotated is not None and rotated.size != rgb.size:
                notes.append(("rotated", {}))
            rgb = rotated if rotated is not None else rgb
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise ImageError("too_many_pixels", "That picture has far too many pixels to open "
                             "safely.", max_mp=f"{max_pixels / 1e6:.0f}") from None
        except ImageError:
            raise
        except (OSError, ValueError, SyntaxError, EOFError) as err:
            raise ImageError("broken", "That image file is damaged or cut short and cannot be "
                             f"read ({str(err).splitlines()[0][:120]}).") from None
    w, h = rgb.size
    if w != h:
        side = min(w, h)
        left, top = (w - side) // 2, (h - side) // 2
        rgb = rgb.crop((left, top, left + side, top + side))
        notes.append(("cropped", {}))
    preview = rgb.copy()
    preview.thumbnail((PREVIEW_SIZE, PREVIEW_SIZE), Image.Resampling.LANCZOS)
    small = rgb.resize((size, size), Image.Resampling.LANCZOS,
                       reducing_gap=3.0 if rgb.size[0] > 3 * size else None)
    notes.append(("resized", {"width": width, "height": height, "size": size}))
    return PreparedImage(np.asarray(small, dtype=np.uint8).copy(),
                         np.asarray(preview, dtype=np.uint8).copy(), (width, height), fmt, mode,
                         notes)


def _to_rgb(img, notes: list[tuple[str, dict]]):
    from PIL import Image

    mode = img.mode
    if mode == "RGB":
        return img
    if mode == "P" and "transparency" in img.info:
        img, mode = img.convert("RGBA"), "RGBA"
    if mode in _ALPHA_MODES:
        rgba = img.convert("RGBA")
        if rgba.getextrema()[3][0] < 255:
            notes.append(("transparent", {}))
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    if mode in _WIDE_MODES:
        a = np.asarray(img, dtype=np.float64)
        lo, hi = float(np.nanmin(a)), float(np.nanmax(a))
        if mode.startswith("I;16") or (mode == "I" and hi > 255):
            a = a / 257.0 if hi > 255 else a
        elif hi > lo and (hi > 255 or lo < 0 or mode == "F"):
            a = (a - lo) / (hi - lo) * 255.0
        a = np.nan_to_num(np.clip(a, 0, 255)).round().astype(np.uint8)
        notes.append(("converted", {"mode": img.mode}))
        return Image.fromarray(a, "L").convert("RGB")
    try:
        out = img.convert("RGB")
    except (ValueError, OSError):
        raise ImageError("odd_mode", f"Images in colour mode {mode} cannot be read here. Please "
                         "save it as an ordinary PNG or JPEG.", mode=mode) from None
    if mode not in ("L", "P", "1"):
        notes.append(("converted", {"mode": mode}))
    return out


def classify_prepared(model: torch.nn.Module, image: PreparedImage, classes: Sequence[str],
                      top: int | None = None) -> list[tuple[str, float]]:
    """(class, probability) for a prepared picture, most likely first."""
    probs = predict(model, image.tensor(), "cpu")[0]
    if len(probs) != len(classes):
        raise CheckpointError(f"The model answers with {len(probs)} classes but {len(classes)} "
                              "class names were given.")
    order = np.argsort(-probs, kind="stable")
    out = [(str(classes[i]), float(probs[i])) for i in order]
    return out[:top] if top else out


def classify_image(model: torch.nn.Module, file_bytes: bytes, classes: Sequence[str],
                   max_pixels: int = MAX_IMAGE_PIXELS,
                   max_bytes: int = MAX_IMAGE_BYTES) -> list[tuple[str, float]]:
    """Classify an uploaded picture: [(class, probability)], most likely first, summing to 1.
    ``ImageError`` (a ``CifarLabError``) when the file cannot be used; see ``prepare_image``."""
    return classify_prepared(model, prepare_image(file_bytes, max_pixels, max_bytes), classes)


def upscale(image: np.ndarray, factor: int = 4) -> np.ndarray:
    """A small image enlarged by repeating pixels (CHW or HWC uint8 in, HWC out), so 32×32
    pictures stay sharp blocks instead of a blur."""
    a = np.asarray(image)
    if a.ndim == 3 and a.shape[0] in (1, 3) and a.shape[-1] not in (1, 3):
        a = a.transpose(1, 2, 0)
    factor = max(1, int(factor))
    return np.ascontiguousarray(a.repeat(factor, axis=0).repeat(factor, axis=1))


# -------------------------------------------------------------------------------- downloads

def state_dict_bytes(ckpt: Checkpoint) -> bytes:
    """The weights alone, as the tutorial saves them (``torch.save(net.state_dict(), PATH)``):
    a file that ``Net().load_state_dict(torch.load(PATH, weights_only=True))`` reads."""
    buf = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in ckpt.state_dict.items()}, buf)
    return buf.getvalue()


# ------------------------------------------------------------------------------- run tables

# Config columns: the knobs a student turns. Result columns follow them in runs_table.
KNOB_COLUMNS = ("device", "pipeline", "epochs", "batch_size", "lr", "momentum", "train_subset",
                "seed", "shuffle", "num_workers", "model")
RESULT_COLUMNS = ("accuracy", "final_loss", "images_per_second", "train_seconds", "steps")
RUN_COLUMNS = ("run", "name", "status", "started") + RESULT_COLUMNS + KNOB_COLUMNS


def model_label(spec: Mapping[str, Any] | ModelSpec | None) -> str:
    """"Net()" for the tutorial's network, else the settings that differ from it."""
    try:
        spec = spec if isinstance(spec, ModelSpec) else ModelSpec.from_dict(spec)
    except CifarLabError:
        return "?"
    base = ModelSpec()
    changes = []
    for name in ("channels", "kernels", "paddings", "strides", "pool", "hidden", "width"):
        value = getattr(spec, name)
        if value != getattr(base, name):
            changes.append(f"{name}={list(value) if isinstance(value, tuple) else value}")
    return "Net(" + ", ".join(changes) + ")"


def runs_table(runs: Sequence[Any]) -> pd.DataFrame:
    """One row per run (newest first, as given): id, result figures and config knobs.

    Columns: ``RUN_COLUMNS``. ``accuracy`` is a percentage; missing figures are NaN/None.
    The ``run`` column holds the full run id (pages shorten it for display).
    """
    rows = []
    for run in runs:
        cfg = dict(run.config or {})
        res = dict(run.result or {})
        acc = res.get("test_accuracy")
        device = res.get("device") or getattr(run, "device", None)
        rows.append({
            "run": run.id,
            "name": run.name or "",
            "status": run.status,
            "started": datetime.fromtimestamp(run.started_at or run.created_at),
            "accuracy": 100.0 * acc if isinstance(acc, (int, float)) else np.nan,
            "final_loss": _num(res.get("final_loss")),
            "images_per_second": _num(res.get("images_per_second")),
            "train_seconds": _num(res.get("train_seconds")),
            "steps": _num(res.get("steps")),
            "device": device,
            "pipeline": cfg.get("pipeline"),
            "epochs": cfg.get("epochs"),
            "batch_size": cfg.get("batch_size"),
            "lr": cfg.get("lr"),
            "momentum": cfg.get("momentum"),
            "train_subset": cfg.get("train_subset"),
            "seed": cfg.get("seed"),
            "shuffle": cfg.get("shuffle"),
            "num_workers": cfg.get("num_workers"),
            "model": model_label(cfg.get("model")),
        })
    return pd.DataFrame(rows, columns=list(RUN_COLUMNS))


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else np.nan


def differing_columns(df: pd.DataFrame, columns: Iterable[str] = KNOB_COLUMNS) -> list[str]:
    """The columns (of ``columns``) whose values are not all the same across ``df``'s rows:
    the knobs that could explain a difference between these runs. None differ for < 2 rows."""
    if len(df) < 2:
        return []
    out = []
    for col in columns:
        if col not in df.columns:
            continue
        values = {_hashable(v) for v in df[col].tolist()}
        if len(values) > 1:
            out.append(col)
    return out


def _hashable(v: Any) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, (list, dict)):
        return repr(v)
    return v


def loss_curves(curves: Mapping[str, tuple[Sequence[int], Sequence[float]]],
                steps_per_epoch: Mapping[str, float] | None = None, x: str = "step",
                smooth: int | None = None) -> pd.DataFrame:
    """Loss curves of several runs in one long frame (columns run, x, loss) for one chart.

    ``curves``: label -> (steps, losses), e.g. from ``store.losses(id, max_points=1000)``.
    ``x``: "step", or "epoch" (step / steps_per_epoch[label], so runs with different batch
    sizes line up). ``smooth``: a centred moving average over that many points (default: about
    1/50 of each curve), since a single step's loss is very noisy. NaN losses stay gaps.
    """
    frames = []
    for label, (steps, losses) in curves.items():
        if len(steps) == 0:
            continue
        s = pd.Series(np.asarray(losses, dtype=float))
        window = smooth if smooth is not None else max(1, len(s) // 50)
        if window > 1:
            s = s.rolling(window, center=True, min_periods=1).mean()
        xs = np.asarray(steps, dtype=float)
        if x == "epoch":
            per = (steps_per_epoch or {}).get(label)
            if not per:
                continue
            xs = xs / float(per)
        frames.append(pd.DataFrame({"run": label, "x": xs, "loss": s.to_numpy()}))
    if not frames:
        return pd.DataFrame(columns=["run", "x", "loss"])
    return pd.concat(frames, ignore_index=True)


def steps_per_epoch(run) -> float | None:
    """Steps in one epoch of a run, from its result (steps / epochs done)."""
    res = run.result or {}
    steps, done = res.get("steps"), res.get("epochs_done")
    if isinstance(steps, (int, float)) and isinstance(done, (int, float)) and done > 0:
        return steps / done
    return None


def config_of(run) -> TrainConfig | None:
    """The run's TrainConfig, or None when its stored config is not one (a timing job)."""
    try:
        return TrainConfig.from_dict(dict(run.config or {}))
    except (CifarLabError, TypeError, KeyError):
        return None
