"""Every upload parser, fed what a careless or hostile student might upload, answers with our
error (a ``CifarLabError``, rendered in the student's language) or a result, never another
exception: the CPU vs GPU page's timing result (JSON and CSV), the Results page's checkpoint,
and the pictures of the Results and Inside pages.

The hostile test's three files come first (200,000 nested brackets, a number of 5,000,000
digits, a CSV whose first line opens 200,000 brackets: json's and pandas' own refusals),
then hypothesis: random bytes, and valid files cut, spliced and bit-flipped.
"""
from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st
from PIL import Image

from cifarlab import i18n
from cifarlab.core import checkpoint as ckpt
from cifarlab.core.config import TrainConfig
from cifarlab.core.model import Net
from cifarlab.errors import CifarLabError
from cifarlab.lab import results as R
from cifarlab.lab.gpu import results as timing

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "docs" / "gpu-results" / "nvidia-h100-80gb-hbm3-2026-11-23"
FUZZ = settings(max_examples=120, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _ours_or_result(parse, *args):
    """Call an upload parser: a result, or our error with a message in every language."""
    try:
        return parse(*args)
    except CifarLabError as err:
        for lang in i18n.LANGUAGES:
            assert err.text(lang).strip()
        return err


# ------------------------------------------------------------------- the hostile test's files

@pytest.mark.parametrize("name, data, code", [
    ("deep.json", b"[" * 200_000, "gpu.not_json"),
    ("deep.json", b'{"format": "cifarlab-timing", "rows": ' + b"[" * 200_000 + b"]" * 200_000
     + b"}", "gpu.not_json"),
    ("deep.json", b'{"format": "cifarlab-timing", "config": ' + b"[" * 900 + b"]" * 900 + b"}",
     "gpu.not_json"),
    ("digits.json", b'{"format": "cifarlab-timing", "version": ' + b"7" * 5_000_000 + b"}",
     "gpu.not_json"),
    ("digits.csv", b"device,batch_size,width\ncpu,4," + b"9" * 5_000_000 + b"\n",
     "gpu.bad_value"),
    ("header.csv", b"# cifarlab-timing " + b"[" * 200_000 + b"\ndevice,batch_size,width\n",
     "gpu.csv_header_damaged"),
    ("rows.csv", b"device,batch_size,width\n" + b"cpu,4,1\n" * 20_000, "gpu.too_many_rows"),
    ("wide.csv", b",".join([b"device", b"batch_size", b"width"] + [b"c"] * 5000) + b"\n",
     "gpu.too_many_columns"),
    ("big.json", b" " * (timing.MAX_UPLOAD_BYTES + 1), "gpu.upload_too_big"),
])
def test_the_hostile_timing_files_get_our_message(name, data, code):
    got = _ours_or_result(timing.load_upload, name, data)
    assert isinstance(got, CifarLabError) and got.code == code, got
    for lang in i18n.LANGUAGES:
        assert name in got.text(lang)


def test_the_limits_do_not_refuse_real_results():
    for suffix in (".json", ".csv"):
        blob = RECORDED.with_suffix(suffix).read_bytes()
        assert timing.load_upload("h100" + suffix, blob).rows


# ---------------------------------------------------------------------- hypothesis: timing

def _mutate(data: bytes, draw) -> bytes:
    """``data`` cut, spliced with random bytes, or with bytes flipped (a few at a time)."""
    b = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        how = draw(st.sampled_from(["cut", "insert", "flip", "delete", "repeat"]))
        at = draw(st.integers(0, max(0, len(b) - 1)))
        if how == "cut":
            del b[at:]
        elif how == "insert":
            b[at:at] = draw(st.binary(min_size=1, max_size=64))
        elif how == "flip" and b:
            b[at] ^= draw(st.integers(1, 255))
        elif how == "delete":
            del b[at:at + draw(st.integers(1, 256))]
        elif how == "repeat":
            b[at:at] = bytes(b[at:at + 8]) * draw(st.integers(2, 5000))
    return bytes(b)


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12)


@FUZZ
@given(data=st.data())
def test_fuzz_timing_json(data):
    good = json.loads(RECORDED.with_suffix(".json").read_text())
    how = data.draw(st.sampled_from(["bytes", "mutated", "values"]))
    if how == "bytes":
        blob = data.draw(st.binary(max_size=2048))
    elif how == "mutated":
        blob = _mutate(json.dumps(good).encode(), data.draw)
    else:  # a well-formed file whose values are of any kind
        doc = dict(good)
        rows = doc["rows"] = [dict(r) for r in good["rows"][:3]]   # kept if "rows" is replaced
        for _ in range(data.draw(st.integers(1, 5))):
            where = data.draw(st.sampled_from(["top", "row"]))
            target = doc if where == "top" else data.draw(st.sampled_from(rows))
            key = data.draw(st.sampled_from(sorted(target)))
            target[key] = data.draw(_JSON_VALUES)
        blob = json.dumps(doc, allow_nan=True).encode()
    _ours_or_result(timing.load_upload, "fuzz.json", blob)


@FUZZ
@given(data=st.data())
def test_fuzz_timing_csv(data):
    good = RECORDED.with_suffix(".csv").read_bytes()
    head, _, body = good.partition(b"\n")
    how = data.draw(st.sampled_from(["bytes", "mutated", "header", "cells"]))
    if how == "bytes":
        blob = data.draw(st.binary(max_size=2048))
    elif how == "mutated":
        blob = _mutate(good[:6000], data.draw)
    elif how == "header":
        blob = b"# cifarlab-timing " + _mutate(head[len(b"# cifarlab-timing "):], data.draw) \
            + b"\n" + body[:3000]
    else:  # one cell of a row replaced by anything
        lines = body.split(b"\n")[:4]
        cells = lines[1].split(b",")
        cells[data.draw(st.integers(0, len(cells) - 1))] = data.draw(
            st.sampled_from([b"1e999", b"-1", b"nan", b"inf", b"True", b"", b'"x,y"',
                             b"9" * 30, b"0x10", b"\xff\xfe"]) | st.binary(max_size=12))
        lines[1] = b",".join(cells)
        blob = head + b"\n" + b"\n".join(lines)
    _ours_or_result(timing.load_upload, "fuzz.csv", blob)


# ------------------------------------------------------------------ hypothesis: checkpoints

@pytest.fixture(scope="module")
def checkpoint_bytes():
    buf = io.BytesIO()
    config = TrainConfig()
    torch.manual_seed(0)
    net = Net(config.model, num_classes=10)
    torch.save({"format": ckpt.FORMAT, "version": ckpt.VERSION, "state_dict": net.state_dict(),
                "config": config.to_dict(), "classes": [f"c{i}" for i in range(10)],
                "results": {"test_accuracy": 0.5}}, buf)
    return buf.getvalue()


def test_a_good_checkpoint_loads(checkpoint_bytes):
    model, loaded = R.load_uploaded_checkpoint(checkpoint_bytes, "good.pth")
    assert len(loaded.classes) == 10


@FUZZ
@given(data=st.data())
def test_fuzz_checkpoint_upload(checkpoint_bytes, data):
    how = data.draw(st.sampled_from(["bytes", "mutated", "zip"]))
    if how == "bytes":
        blob = data.draw(st.binary(max_size=4096))
    elif how == "mutated":
        blob = _mutate(checkpoint_bytes, data.draw)
    else:  # a zip of any records, some named as torch names them
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            names = data.draw(st.lists(st.sampled_from(
                ["archive/data.pkl", "archive/version", "archive/data/0", "archive/byteorder",
                 "archive/.data/serialization_id", "x/other"]), max_size=5, unique=True))
            for name in names:
                z.writestr(name, data.draw(st.binary(max_size=256)))
        blob = buf.getvalue()
    _ours_or_result(R.load_uploaded_checkpoint, blob, "fuzz.pth")


# ----------------------------------------------------------------------- hypothesis: images

def _picture(fmt: str) -> bytes:
    rng = np.random.default_rng(5)
    img = Image.fromarray(rng.integers(0, 255, (40, 48, 3), dtype=np.uint8))
    buf = io.BytesIO()
    img.save(buf, format=fmt)
    return buf.getvalue()


PICTURES = {fmt: _picture(fmt) for fmt in ("PNG", "JPEG", "GIF", "BMP", "TIFF", "WEBP")}


@pytest.mark.filterwarnings("ignore:Tag data larger than file:UserWarning")  # Pillow, on torn TIFFs
@FUZZ
@given(data=st.data())
def test_fuzz_picture_upload(data):
    how = data.draw(st.sampled_from(["bytes", "mutated"]))
    if how == "bytes":
        blob = data.draw(st.binary(max_size=2048))
    else:
        blob = _mutate(PICTURES[data.draw(st.sampled_from(sorted(PICTURES)))], data.draw)
    got = _ours_or_result(R.prepare_image, blob)
    if not isinstance(got, CifarLabError):
        assert got.pixels.shape == (32, 32, 3) and got.pixels.dtype == np.uint8


# ------------------------------------------------------------------------ the upload limits

def test_every_refused_upload_size_reaches_our_message():
    """The widgets' cap (the browser refuses above it, in Streamlit's English) sits far above
    every limit of ours, so a file too large for us is refused by our message in the page's
    language: the hostile test's 68.7 MB checkpoint too. The server's cap sits above the
    widgets' (the GPU page's uploader has none of its own: it gets the server's)."""
    import tomllib

    with open(ROOT / ".streamlit" / "config.toml", "rb") as f:
        server_mb = tomllib.load(f)["server"]["maxUploadSize"]
    hostile = int(68.7 * 2**20)
    assert hostile <= R.UPLOADER_MB * 2**20 <= (server_mb - 1) * 2**20
    assert R.UPLOADER_MB >= 200   # Streamlit's own default: no file we used to take is refused
    assert timing.MAX_UPLOAD_BYTES < R.UPLOADER_MB * 2**20
    with pytest.raises(CifarLabError) as info:
        R.load_uploaded_checkpoint(bytes(hostile), "cifar_net.pth")
    assert info.value.code == "checkpoint.file_too_large"
    assert "68,7" in info.value.text("es") or "68.7" in info.value.text("es")
