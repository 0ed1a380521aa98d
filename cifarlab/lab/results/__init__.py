"""The Results page's engine. Uploads never decide what they cost: a checkpoint is refused by
arithmetic before its network is built (``core.checkpoint``), a picture by its header."""
from __future__ import annotations

import io
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from PIL import Image, UnidentifiedImageError

from cifarlab.core.checkpoint import MAX_CHECKPOINT_BYTES, Checkpoint, load as load_checkpoint
from cifarlab.core.evaluate import EvalResult, evaluate, predict
from cifarlab.errors import CheckpointError, UploadError

# The PyTorch tutorial's printed figures: 54 % overall after 2 epochs; per class they swing
# widely from run to run (two runs of the tutorial: bird 21-38 %, ship 61-81 %).
TUTORIAL_REFERENCE: dict[str, Any] = {
    "accuracy": 0.54,
    "per_class_ranges": {"bird": (0.21, 0.38), "ship": (0.61, 0.81)},
}


def load_run_model(path) -> tuple[torch.nn.Module, Checkpoint]:
    """The model a run saved, on the CPU (``path``: ``JobQueue.checkpoint``'s, session-checked)."""
    if not path.is_file():
        raise CheckpointError("checkpoint.no_saved_model")
    ckpt = load_checkpoint(path, map_location="cpu")
    return ckpt.model().eval(), ckpt


def predictions_for(model: torch.nn.Module, data, tta: bool = False) -> EvalResult:
    """The model's ``EvalResult`` on the test set (``tta``: with mirrored testing)."""
    out_features = getattr(getattr(model, "fc3", None), "out_features", None)
    if out_features is not None and out_features != len(data.classes):
        raise CheckpointError("checkpoint.other_classes", n=out_features,
                              classes=len(data.classes))
    return evaluate(model, data, "cpu", tta=tta)


def confused_examples(ev: EvalResult, true_cls: int | None = None, pred_cls: int | None = None,
                      limit: int = 24) -> np.ndarray:
    """Test images of ``true_cls`` called ``pred_cls`` (none given: every mistake), surest first."""
    if true_cls is None:
        idx = np.flatnonzero(ev.predictions != ev.labels)
    else:
        idx = np.flatnonzero((ev.labels == true_cls) & (ev.predictions == pred_cls))
    return idx[np.argsort(-ev.probabilities[idx, ev.predictions[idx]], kind="stable")][:limit]


def picked_cell(point: Mapping[str, Any], names: Sequence[str]) -> tuple[int, int] | None:
    """(true, predicted) of a clicked confusion-matrix cell (``ui.widgets.clicked_points``')."""
    x, y, names = point.get("x"), point.get("y"), list(names)
    return (names.index(y), names.index(x)) if x in names and y in names else None


def most_confused_pair(confusion: Sequence[Sequence[int]]) -> tuple[int, int]:
    """(true, predicted) of the largest off-diagonal cell; (0, 0) when there are no mistakes."""
    m = np.array(confusion, dtype=np.int64)
    np.fill_diagonal(m, -1)
    i, j = np.unravel_index(int(np.argmax(m)), m.shape)
    return (int(i), int(j)) if m[i, j] > 0 else (0, 0)


def sample_predictions(ev: EvalResult, n: int = 16, seed: int = 0) -> pd.DataFrame:
    """``n`` test images picked by ``seed``: index, true, predicted, confidence, correct."""
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
    """(epoch, class, accuracy) rows from a run's "epoch" events or ``result["epochs"]``."""
    rows = []
    for item in events or ():
        data = getattr(item, "data", item)
        if getattr(item, "kind", "epoch") == "epoch":
            rows += [{"epoch": int(data["epoch"]), "class": str(c), "accuracy": float(a)}
                     for c, a in (data.get("per_class_accuracy") or {}).items()]
    df = pd.DataFrame(rows, columns=["epoch", "class", "accuracy"])
    return df.drop_duplicates(["epoch", "class"], keep="last").reset_index(drop=True)


# One limit for every upload: the largest checkpoint. The uploaders keep Streamlit's 200 MB (it
# refuses in English, ours in the student's language); the server's is 1 MB more, for framing.
MAX_UPLOAD_BYTES = MAX_CHECKPOINT_BYTES
UPLOADER_MB = 200
SERVER_UPLOAD_MB = UPLOADER_MB + 1
# A picture's header is checked before anything is decoded: at most 24 megapixels (more than
# phones save) and 96 MiB decoded, counting its bits per sample.
MAX_IMAGE_PIXELS = 24_000_000
MAX_DECODE_BYTES = 96 * 2**20
IMAGE_FORMATS = ("PNG", "JPEG", "GIF", "WEBP", "BMP", "TIFF")  # JPEG opens MPO too
PREVIEW_SIZE = 256


def load_uploaded_checkpoint(data: bytes, name: str = "checkpoint.pth",
                             max_bytes: int = MAX_CHECKPOINT_BYTES
                             ) -> tuple[torch.nn.Module, Checkpoint]:
    """An uploaded checkpoint (ours or a tutorial state_dict), checked by ``core.checkpoint``."""
    buf = io.BytesIO(data)
    buf.name = name
    ckpt = load_checkpoint(buf, map_location="cpu", max_bytes=max_bytes)
    return ckpt.model().eval(), ckpt


class ImageError(UploadError):
    def __init__(self, code: str, /, **params: Any):
        super().__init__(code, field="image", **params)


@dataclass
class PreparedImage:
    """A picture as the network sees it: 32×32 RGB (HWC uint8), and how it got there."""

    pixels: np.ndarray                  # 32×32×3 uint8
    preview: np.ndarray                 # the original, at most PREVIEW_SIZE on a side, RGB
    notes: list[tuple[str, dict]] = field(default_factory=list)  # (code, params) for the page


_ALPHA_MODES = {"RGBA", "LA", "PA", "RGBa", "La"}
_WIDE_MODES = {"I", "F", "I;16", "I;16B", "I;16L", "I;16N"}
# the turn that makes a photo upright, by its EXIF orientation (as ImageOps.exif_transpose)
_UPRIGHT = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180,
            4: Image.Transpose.FLIP_TOP_BOTTOM, 5: Image.Transpose.TRANSPOSE,
            6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
            8: Image.Transpose.ROTATE_90}
_STORED_BYTES = {"1": 1, "L": 1, "P": 1, "I;16": 2, "I;16B": 2, "I;16L": 2, "I;16N": 2}  # else 4


def prepare_image(file_bytes: bytes, max_pixels: int = MAX_IMAGE_PIXELS,
                  max_bytes: int = MAX_UPLOAD_BYTES, size: int = 32) -> PreparedImage:
    """An uploaded picture decoded safely and shrunk to ``size``×``size`` RGB; refused
    (``ImageError``) by its header when too costly. Noted: transparency (over white), a crop."""
    if not file_bytes:
        raise ImageError("image.empty")
    if len(file_bytes) > max_bytes:
        raise ImageError("image.too_big_bytes", size_mb=len(file_bytes) / 2**20,
                         limit_mb=max_bytes / 2**20)
    notes: list[tuple[str, dict]] = []
    bomb = (Image.DecompressionBombError, Image.DecompressionBombWarning)
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            img = Image.open(io.BytesIO(file_bytes), formats=IMAGE_FORMATS)  # the header only
        except bomb:
            raise ImageError("image.bomb", limit_mp=max_pixels / 1e6) from None
        except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError):
            raise ImageError("image.not_image") from None
        (width, height), fmt = img.size, img.format
        if width < 1 or height < 1:
            raise ImageError("image.broken")
        try:
            if fmt in ("JPEG", "MPO"):  # decoded at 1/2, 1/4 or 1/8 scale, still ≥ the preview
                img.draft("RGB", (max(size, PREVIEW_SIZE), max(size, PREVIEW_SIZE)))
            _check_cost(img, width, height, max_pixels)
            img.load()   # an animation's first frame
            try:
                turn = _UPRIGHT.get(int(img.getexif().get(0x0112, 1)))   # EXIF's Orientation
            except (ValueError, TypeError, OSError, SyntaxError):   # damaged EXIF: as it is
                turn = None
            rgb = _to_rgb(_shrink(img, 2 * PREVIEW_SIZE), notes)
            rgb = rgb if turn is None else rgb.transpose(turn)
        except bomb:
            raise ImageError("image.bomb", limit_mp=max_pixels / 1e6) from None
        except ImageError:
            raise
        except (OSError, ValueError, SyntaxError, EOFError):
            raise ImageError("image.broken") from None
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
                         np.asarray(preview, dtype=np.uint8).copy(), notes)


def _check_cost(img, width: int, height: int, max_pixels: int) -> None:
    """Refuse, from the header, a picture whose pixels (a JPEG's at its draft scale) would
    take too many bytes (the larger of the file's bits per sample and Pillow's)."""
    w, h = img.size
    if w * h > max_pixels:
        raise ImageError("image.too_many_pixels", width=width, height=height,
                         size=f"{width}×{height}", limit_mp=max_pixels / 1e6)
    raw = next((a for t in img.tile or () for a in (t.args if isinstance(t.args, tuple)
                                                     else (t.args,)) if isinstance(a, str)),
               img.mode)
    sample = 2 if "16" in raw else 4 if ("32" in raw or img.mode in ("I", "F")) else 1
    per_pixel = max(_STORED_BYTES.get(img.mode, 4), len(img.getbands()) * sample)
    if w * h * per_pixel > MAX_DECODE_BYTES:
        raise ImageError("image.too_much_data", width=width, height=height,
                         size=f"{width}×{height}", bits=8 * per_pixel,
                         size_mb=w * h * per_pixel / 2**20, limit_mb=MAX_DECODE_BYTES / 2**20)


def _shrink(img, least: int):
    """Box-average a big picture down before any colour conversion (to no less than ``least``)."""
    w, h = img.size
    factor = min(w, h) // least
    if factor < 2:
        return img
    if img.mode == "P":  # palette indices cannot be averaged
        img = img.convert("RGBA" if "transparency" in img.info else "RGB")
    return img.resize((w // factor, h // factor), Image.Resampling.BOX)


def _to_rgb(img, notes: list[tuple[str, dict]]):
    mode = img.mode
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
        return Image.fromarray(a, "L").convert("RGB")
    try:
        return img.convert("RGB")
    except (ValueError, OSError):
        raise ImageError("image.odd_mode", mode=mode) from None


def classify_prepared(model: torch.nn.Module, image: PreparedImage,
                      classes: Sequence[str]) -> list[tuple[str, float]]:
    """(class, probability) for a ``prepare_image`` picture, the most likely first."""
    pixels = torch.from_numpy(np.ascontiguousarray(image.pixels.transpose(2, 0, 1)))[None]
    probs = predict(model, pixels, "cpu")[0]
    order = np.argsort(-probs, kind="stable")
    return [(str(classes[i]), float(probs[i])) for i in order]
