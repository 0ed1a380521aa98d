"""Upload bombs: small files that would make the server allocate gigabytes are refused by
arithmetic, before anything big is allocated or decoded.

All the bombs are loaded in one child process (the server's code path:
``load_uploaded_checkpoint``, ``prepare_image``; or the command line's ``eval``), good files
first, which reports each load's peak memory (``VmHWM``, reset before each load through
``/proc/self/clear_refs``) and CPU time: one interpreter importing torch instead of one a load.
The bomb may cost at most ``HEADROOM_MB`` more than loading a good file the same way, and must
be refused with a coded error. As a safety net the child's address space is capped a few GiB
above its imports, so that a bomb the code lets through fails the test instead of taking the
machine down.
"""
from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import pytest
import torch

from cifarlab import i18n
from cifarlab.core import checkpoint as ckpt
from cifarlab.core.config import ModelSpec, TrainConfig
from cifarlab.core.model import Net
from cifarlab.errors import CheckpointError
from cifarlab.lab import results as R

ROOT = Path(__file__).resolve().parents[1]
HEADROOM_MB = 200

CHILD = r"""
import ctypes, gc, json, resource, sys, time
import torch, PIL.Image, numpy
from cifarlab import cli
from cifarlab.core import checkpoint
from cifarlab.lab import results as R
from cifarlab.errors import CifarLabError

def status(key):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(key + ":"))  # kB

def load(kind, path, extra):
    if kind == "upload":
        with open(path, "rb") as f:
            R.load_uploaded_checkpoint(f.read(), "upload.pth")
    elif kind == "file":
        checkpoint.load(path).model()
    elif kind == "eval":
        return {"exit": cli.main(["eval", path, *extra])}
    elif kind == "image":
        with open(path, "rb") as f:
            R.prepare_image(f.read())
    return {"ok": True}

cap = (status("VmSize") + 3 * 2**20) * 1024          # imports + 3 GiB of address space
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
imported, libc = status("VmHWM"), ctypes.CDLL("libc.so.6")
results = {}
for name, kind, path, *extra in json.loads(sys.argv[1]):
    gc.collect()
    libc.malloc_trim(0)                              # what the last load freed goes back
    with open("/proc/self/clear_refs", "w") as f:    # the peak starts again from here
        f.write("5")
    cpu0, out = time.process_time(), {}
    try:
        out.update(load(kind, path, extra))
    except CifarLabError as err:
        out.update(code=err.code, params={k: v if isinstance(v, (int, float, str)) else repr(v)
                                          for k, v in err.params.items()},
                   text={lang: err.text(lang) for lang in ("en", "es", "pt")})
    except BaseException as err:
        out.update(crash=type(err).__name__, message=str(err)[:300])
    results[name] = dict(out, peak_mb=status("VmHWM") / 1024, imported_mb=imported / 1024,
                         cpu_s=time.process_time() - cpu0)
print("RESULT " + json.dumps(results))
"""


def child(cases: list[tuple[str, ...]]) -> dict:
    """Each case's result by name; a case is (name, kind, path, *extra arguments)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cases)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"the child died (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(lines[-1][len("RESULT "):])


def assert_refused_cheaply(bomb: dict, good: dict, code: str, figures, what: str) -> None:
    figures(f"{what}: peak {bomb['peak_mb']:.0f} MB vs {good['peak_mb']:.0f} MB for a good file "
            f"(+{bomb['peak_mb'] - good['peak_mb']:.0f} MB), CPU {bomb['cpu_s']:.2f} s; "
            f"refused as {bomb.get('code')!r}")
    assert good.get("ok") or good.get("exit") == 0, good
    assert bomb.get("code") == code, bomb
    assert bomb["peak_mb"] <= good["peak_mb"] + HEADROOM_MB, (bomb, good)
    texts = bomb["text"]
    assert len(set(texts.values())) == 3, texts          # really in three languages
    assert "{" not in "".join(texts.values()), texts     # every placeholder filled


# ------------------------------------------------------------------------------ the bombs

def small_checkpoint_claiming(model: ModelSpec) -> bytes:
    """A ~2 KB CIFAR Lab checkpoint whose config asks for ``model`` and whose weights are one
    tiny tensor: loading it the old way built the whole network before looking at them."""
    payload = {"format": ckpt.FORMAT, "version": ckpt.VERSION,
               "state_dict": {"fc3.bias": torch.zeros(10)},
               "config": TrainConfig(model=model).to_dict(),
               "classes": [f"c{i}" for i in range(10)],
               "results": {}}
    buf = io.BytesIO()
    torch.save(payload, buf)
    return buf.getvalue()


def _deflated(head: bytes, total: int) -> tuple[bytes, int]:
    """Raw deflate of ``head`` followed by zeros up to ``total`` bytes, and its CRC-32, made in
    well under a second: after a full flush every 16 MiB block of zeros compresses to the same
    bytes, so one is compressed and repeated."""
    chunk = 1 << 24
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    parts = [c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)]
    n_blocks, rest = divmod(total - len(head), chunk)
    block = c.compress(bytes(chunk)) + c.flush(zlib.Z_FULL_FLUSH)
    assert block == c.compress(bytes(chunk)) + c.flush(zlib.Z_FULL_FLUSH)
    parts += [block] * n_blocks + [c.compress(bytes(rest)) + c.flush()]
    crc = zlib.crc32(head)
    zeros = bytes(chunk)
    for _ in range(n_blocks):
        crc = zlib.crc32(zeros, crc)
    return b"".join(parts), zlib.crc32(bytes(rest), crc)


def zip_with_deflated_zeros(good: bytes, unpacked: int = 1 << 30) -> bytes:
    """``good`` (a torch.save zip) rewritten with its largest weights record deflated and padded
    with zeros to ``unpacked`` bytes: about 1 MB on disk that inflates to 1 GiB."""
    src = zipfile.ZipFile(io.BytesIO(good))
    names = src.namelist()
    big = max(names, key=lambda n: src.getinfo(n).file_size)
    out, central = io.BytesIO(), []
    for name in names:
        data = src.read(name)
        if name == big:
            (comp, crc), size, method = _deflated(data, unpacked), unpacked, zipfile.ZIP_DEFLATED
        else:
            comp, crc, size, method = data, zlib.crc32(data), len(data), zipfile.ZIP_STORED
        offset, fn = out.tell(), name.encode()
        out.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0, crc, len(comp),
                              size, len(fn), 0) + fn + comp)
        central.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0,
                                   crc, len(comp), size, len(fn), 0, 0, 0, 0, 0, offset) + fn)
    directory = b"".join(central)
    out.write(directory + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(central), len(central),
                                      len(directory), out.tell(), 0))
    return out.getvalue()


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def sixteen_bit_png(width: int, height: int) -> bytes:
    """A real, valid ``width``×``height`` 16-bit grayscale PNG of zeros (each row: filter byte
    0, then 2 bytes a pixel), compressed with zlib: 39 MP is about 77 KB."""
    row = bytes(1 + 2 * width)
    rows_per_block = max(1, (1 << 22) // len(row))
    c = zlib.compressobj(9)
    idat = []
    for start in range(0, height, rows_per_block):
        idat.append(c.compress(row * min(rows_per_block, height - start)))
    idat.append(c.flush())
    ihdr = struct.pack(">IIBBBBB", width, height, 16, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", b"".join(idat))
            + png_chunk(b"IEND", b""))


# ------------------------------------------------------------------------------ fixtures

HUGE = {width: ModelSpec(hidden=(8192, 8192), width=width) for width in (2, 8)}


@pytest.fixture(scope="module")
def good_checkpoint(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bombs") / "good.pth"
    torch.manual_seed(0)
    return ckpt.save(path, Net(), TrainConfig(), [f"c{i}" for i in range(10)], {})


@pytest.fixture(scope="module")
def png_bomb() -> bytes:
    return sixteen_bit_png(6245, 6245)


@pytest.fixture(scope="module")
def bombs(good_checkpoint, png_bomb) -> dict[str, bytes]:
    """Every bomb of this module, by name, as the bytes the child loads."""
    return {"huge2": small_checkpoint_claiming(HUGE[2]),
            "huge8": small_checkpoint_claiming(HUGE[8]),
            "zeros": zip_with_deflated_zeros(good_checkpoint.read_bytes()),
            "png": png_bomb}


@pytest.fixture(scope="module")
def loaded(request, good_checkpoint, bombs, tmp_path_factory) -> dict[str, dict]:
    """Every load of this module, good files first, in one child (see the module's doc)."""
    folder = tmp_path_factory.mktemp("bomb-files")
    good_png = folder / "good.png"
    good_png.write_bytes(sixteen_bit_png(64, 64))
    paths = {}
    for name, blob in bombs.items():
        paths[name] = str(folder / name)
        Path(paths[name]).write_bytes(blob)
    cases = [("good_upload", "upload", str(good_checkpoint)),
             ("good_file", "file", str(good_checkpoint)),
             ("good_image", "image", str(good_png)),
             ("huge2_upload", "upload", paths["huge2"]),
             ("huge8_upload", "upload", paths["huge8"]),
             ("huge2_file", "file", paths["huge2"]),
             ("zeros_upload", "upload", paths["zeros"]),
             ("png_image", "image", paths["png"])]
    try:   # the command line's eval reads the data set: without it, that test alone skips
        archive = request.getfixturevalue("cifar_archive")
    except pytest.skip.Exception:
        archive = None
    if archive:
        cases.append(("huge2_eval", "eval", paths["huge2"], "--data", str(archive)))
    return child(cases)


# ------------------------------------------------------------------------------ checkpoints

@pytest.mark.parametrize("width", [2, 8])
def test_a_2kb_checkpoint_asking_for_a_huge_network_is_refused_by_arithmetic(
        bombs, loaded, figures, width):
    spec = HUGE[width]
    assert len(bombs[f"huge{width}"]) < 4096
    bomb = loaded[f"huge{width}_upload"]
    assert_refused_cheaply(bomb, loaded["good_upload"], "checkpoint.too_large", figures,
                           f"2 KB checkpoint, hidden=(8192, 8192), width={width}")
    from cifarlab.core.shapes import total_params, trace_spec

    assert bomb["params"]["params"] == total_params(trace_spec(spec))
    assert bomb["params"]["limit"] == ckpt.MAX_UPLOAD_PARAMS
    # the message names the size in each language's notation
    assert f"{ckpt.MAX_UPLOAD_PARAMS:,}" in bomb["text"]["en"]
    assert f"{ckpt.MAX_UPLOAD_PARAMS:,}".replace(",", ".") in bomb["text"]["es"]


def test_the_command_lines_eval_refuses_it_too(loaded, cifar_archive, figures):
    # the measurement: +963 MB peak through `python -m cifarlab eval` for width 2
    good = loaded["good_file"]
    assert_refused_cheaply(loaded["huge2_file"], good, "checkpoint.too_large", figures,
                           "checkpoint.load(path).model(), width 2")
    evaluated = loaded["huge2_eval"]
    assert evaluated["exit"] == 2 and evaluated["peak_mb"] <= good["peak_mb"] + HEADROOM_MB


def test_a_zip_record_of_deflated_zeros_is_refused_from_the_directory(
        good_checkpoint, bombs, loaded, figures):
    blob = bombs["zeros"]
    assert len(blob) < 2 * 2**20
    info = max(zipfile.ZipFile(io.BytesIO(blob)).infolist(), key=lambda i: i.file_size)
    assert info.file_size == 2**30 and zlib.decompressobj(-15).decompress(
        blob[info.header_offset + 30 + len(info.filename):][:100_000], 2**20)[:4] == \
        zipfile.ZipFile(io.BytesIO(good_checkpoint.read_bytes())).read(info.filename)[:4]
    bomb = loaded["zeros_upload"]
    assert_refused_cheaply(bomb, loaded["good_upload"], "checkpoint.unpacks_too_large", figures,
                           "1 MB zip whose record inflates to 1 GiB")
    assert bomb["params"]["size"] > bomb["params"]["limit"]


def test_the_largest_network_allowed_loads(tmp_path):
    # the budget admits the tutorial's Net at width 16 (15.5 M parameters, 62 MB)
    spec = ModelSpec(width=16)
    path = ckpt.save(tmp_path / "wide.pth", Net(spec), TrainConfig(model=spec), [f"c{i}" for i
                                                                                 in range(10)])
    assert path.stat().st_size <= R.MAX_CHECKPOINT_BYTES
    model, loaded = R.load_uploaded_checkpoint(path.read_bytes(), "wide.pth")
    assert loaded.config.model == spec
    assert sum(p.numel() for p in model.parameters()) <= ckpt.MAX_UPLOAD_PARAMS


# ---------------------------------------------------------------------------------- images

def test_a_39_megapixel_16_bit_png_is_refused_before_decoding(png_bomb, loaded, figures):
    assert len(png_bomb) < 100_000
    bomb = loaded["png_image"]
    assert_refused_cheaply(bomb, loaded["good_image"], "image.too_many_pixels", figures,
                           "77 KB 39-megapixel 16-bit PNG")
    assert bomb["params"]["width"] == 6245 and bomb["params"]["height"] == 6245
    assert "6245×6245" in bomb["text"]["es"]


def test_pillows_own_bomb_check_is_not_needed(monkeypatch, png_bomb):
    # our arithmetic refuses the picture even where Pillow's guard has been switched off
    from PIL import Image

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)
    with pytest.raises(R.ImageError) as info:
        R.prepare_image(png_bomb)
    assert info.value.code == "image.too_many_pixels"


# ------------------------------------------------------------------------------ the limits

def test_every_upload_limit_comes_from_one_constant():
    import tomllib

    with open(ROOT / ".streamlit" / "config.toml", "rb") as f:
        server_mb = tomllib.load(f)["server"]["maxUploadSize"]
    assert server_mb == R.SERVER_UPLOAD_MB
    # the widgets let a file a little over our limit through, so that our message (in the
    # student's language) refuses it; the server's cap counts the request's framing too, so it
    # sits above anything the widgets let through: no raw "AxiosError 413"
    assert R.MAX_CHECKPOINT_BYTES == R.MAX_UPLOAD_BYTES
    assert R.UPLOADER_MB * 2**20 > R.MAX_UPLOAD_BYTES
    assert R.SERVER_UPLOAD_MB * 2**20 >= R.UPLOADER_MB * 2**20 + 2**20
    # the largest network allowed fits in the largest file accepted
    assert ckpt.MAX_UPLOAD_PARAMS * 4 + ckpt.METADATA_BYTES <= R.MAX_CHECKPOINT_BYTES
    # every uploader names its own limit (Streamlit's default would be the server's)
    import ast

    uploaders = []
    for path in sorted([*(ROOT / "pages").rglob("*.py"), *(ROOT / "ui").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "file_uploader":
                kw = {k.arg: ast.unparse(k.value) for k in node.keywords}
                uploaders.append((path.name, kw.get("max_upload_size")))
    assert ("results.py", "R.UPLOADER_MB") in uploaders
    assert ("models.py", "R.UPLOADER_MB") in uploaders
    assert ("gpu.py", "results.UPLOADER_MB") in uploaders
    assert all(limit for _, limit in uploaders), uploaders


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_a_file_over_the_limit_gets_our_message(lang):
    blob = bytes(R.MAX_UPLOAD_BYTES + 1)
    with pytest.raises(CheckpointError) as info:
        R.load_uploaded_checkpoint(blob, "big.pth")
    assert info.value.code == "checkpoint.file_too_large"
    assert "big.pth" in info.value.text(lang) and "64" in info.value.text(lang)
    with pytest.raises(R.ImageError) as info:
        R.prepare_image(blob)
    assert info.value.code == "image.too_big_bytes" and "64" in info.value.text(lang)


# ------------------------------------------------------------- the directory's other checks

def test_a_record_compressed_absurdly_is_refused_even_when_small(good_checkpoint):
    blob = zip_with_deflated_zeros(good_checkpoint.read_bytes(), unpacked=4 * 2**20)
    with pytest.raises(CheckpointError) as info:
        R.load_uploaded_checkpoint(blob, "packed.pth")
    assert info.value.code == "checkpoint.compression_ratio"
    assert info.value.params["ratio"] > ckpt.MAX_RATIO and "packed.pth" in info.value.text("es")


def test_settings_and_results_have_a_budget_too(tmp_path):
    spec = ModelSpec()
    path = ckpt.save(tmp_path / "chatty.pth", Net(spec), TrainConfig(),
                     [f"c{i}" for i in range(10)],
                     {"notes": [f"{i:04d}" + "x" * 1000 for i in range(3000)]})  # 3 MB
    with pytest.raises(CheckpointError) as info:
        R.load_uploaded_checkpoint(path.read_bytes(), "chatty.pth")
    assert info.value.code == "checkpoint.metadata_too_large"
