"""cifarlab.core.export and ``python -m cifarlab export``: the exported script runs on its own,
repeats the app's run (both pipelines, every epoch: the same running losses and accuracy),
saves the tutorial's state_dict, writes every config field, and is valid Python with the right
network for any config.

The end-to-end runs use a small image folder cut from the real CIFAR-10 (300 + 200 images,
lossless PNG), so that the app (``cifarlab.core.train.train``) and the script read the same
pixels without extracting 60,000 files. The scripts run one after another in one plain
interpreter of their own (no cifarlab on its path), so that torch is imported once, not per script.
"""
import ast
import dataclasses
import json
import re
import runpy
import subprocess
import sys
import tarfile

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from cifarlab.cli import main
from cifarlab.core import checkpoint
from cifarlab.core.config import (ACTIVATIONS, CIFAR10_CLASSES, MAX_SEED, MAX_WORKERS, ModelSpec,
                                  TrainConfig, knob)
from cifarlab.core.data import load
from cifarlab.core.data.pipelines import FastLoader, SeededShuffle
from cifarlab.core.export.render import constant_name, export_script
from cifarlab.core.model import Net as LabNet
from cifarlab.core.train import train
from cifarlab.errors import ShapeError
from tutorial_net import Net as TutorialNet

PER_CLASS = {"train": 30, "test": 20}
LOSS_LINE = re.compile(r"^\[(\d+), +(\d+)\] loss: (\d+\.\d{3})$", re.M)


def _imports(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add((node.module or "").split(".")[0])
    return names


@pytest.fixture(scope="module")
def small(cifar_data, tmp_path_factory):
    """(folder, archive, CifarData): the first images of each class of the real CIFAR-10 as
    PNG in train/<class>/ and test/<class>/, the same as a .tar.gz (one folder inside), and
    what the app decodes from that archive."""
    from PIL import Image

    base = tmp_path_factory.mktemp("small-cifar")
    folder = base / "cifar10"
    for split, k in PER_CLASS.items():
        x, y = cifar_data.split(split)
        for c, name in enumerate(cifar_data.classes):
            (folder / split / name).mkdir(parents=True)
            for j, i in enumerate(np.flatnonzero(np.asarray(y) == c)[:k]):
                Image.fromarray(np.ascontiguousarray(x[i].transpose(1, 2, 0))).save(
                    folder / split / name / f"{j:04d}.png")
    archive = base / "small-cifar.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname="cifar10")
    data = load(str(archive), cache_dir=base / "cache")
    assert data.n_train == 300 and data.n_test == 200 and data.classes == cifar_data.classes
    return folder, archive, data


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Everything here on one CPU thread, as the scripts run (OMP_NUM_THREADS=1): the order of
    the sums depends on the thread count, so both sides use the same one; and on a busy 2-core
    machine one thread is several times faster than two."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# The end-to-end scripts, by test: (config, its source, its source note). They run one after
# another in one fresh interpreter (``scripts``: one torch import, not one per script).
SCRIPTS = {
    **{("epochs", pipeline): (TrainConfig(epochs=2, train_subset=240, batch_size=4,
                                          num_workers=num_workers, log_every=20, device="cpu",
                                          pipeline=pipeline, seed=3),
                              source, "run 0123 on the test server\nsecond")
       for pipeline, num_workers, source in (("tutorial", 2, "archive"), ("fast", 0, "folder"))},
    "short": (TrainConfig(epochs=2, train_subset=40, batch_size=4, num_workers=0, device="cpu",
                          pipeline="fast", seed=5), "folder", None),
    **{("validation", pipeline): (TrainConfig(epochs=2, train_subset=80, batch_size=4,
                                              num_workers=0, log_every=5, device="cpu",
                                              pipeline=pipeline, seed=3, val_fraction=0.25),
                                  "folder", None)
       for pipeline in ("tutorial", "fast")},
}

RUNNER = r"""
import contextlib, io, json, os, runpy, sys, traceback
scripts, report = json.loads(sys.argv[1]), sys.argv[2]
outs = []
for script, source, work in scripts:
    os.chdir(work)
    sys.argv, out = [script, source], io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(script, run_name="__main__")
        outs.append({"out": out.getvalue()})
    except BaseException:
        outs.append({"out": out.getvalue(), "error": traceback.format_exc()})
with open(report, "w") as f:
    json.dump(outs, f)
"""


@pytest.fixture(scope="module")
def scripts(small, tmp_path_factory):
    """Each of SCRIPTS exported and run on its source in a fresh folder, as a student runs it
    (a plain interpreter: no cifarlab on its path, one thread); by key: (text, stdout, folder)."""
    folder, archive, _ = small
    base, jobs, made = tmp_path_factory.mktemp("scripts"), [], {}
    for n, (key, (config, source, note)) in enumerate(SCRIPTS.items()):
        script, work = base / f"{n}" / "cifar_run.py", base / f"{n}" / "work"
        work.mkdir(parents=True)
        script.write_text(export_script(config, source_note=note, script_name=script.name))
        jobs.append((str(script), str(archive if source == "archive" else folder), str(work)))
        made[key] = (script, work)
    report = base / "report.json"
    proc = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(jobs), str(report)],
                          cwd=base, capture_output=True, text=True, timeout=900,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(base),
                               "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = {}
    for (key, (script, work)), got in zip(made.items(), json.loads(report.read_text()),
                                          strict=True):
        assert "error" not in got, (key, got["error"][-3000:])
        runs[key] = (script.read_text(), got["out"], work)
    return runs


def _accuracy_lines(out: str) -> tuple[int, dict[str, str]]:
    overall = re.search(r"^Accuracy of the network on the 200 test images: (\d+) %$", out, re.M)
    per_class = dict(re.findall(r"^Accuracy for class: (\w+) +is (\d+\.\d) %$", out, re.M))
    assert overall and len(per_class) == 10, out[-2000:]
    return int(overall.group(1)), per_class


@pytest.mark.parametrize("pipeline,num_workers,source", [("tutorial", 2, "archive"),
                                                         ("fast", 0, "folder")])
def test_the_script_repeats_the_apps_run_epoch_for_epoch(pipeline, num_workers, source, small,
                                                         scripts):
    _, _, data = small
    config, want_source, _ = SCRIPTS["epochs", pipeline]
    assert (config.num_workers, want_source) == (num_workers, source)
    text, out, work = scripts["epochs", pipeline]
    assert "cifarlab" not in _imports(text)
    assert "# run 0123 on the test server\n# second\n" in text
    assert f"PIPELINE = '{pipeline}'" in text and "TRAIN_SUBSET = 240" in text
    assert "torch.save(net.state_dict(), PATH)" in text and "Finished Training" in out

    # the app's run: same images, initial weights and order each epoch, so the same losses
    result = train(config, data)
    ours = [(r["epoch"], r["i"], "%.3f" % r["loss"]) for r in result.running_losses]
    theirs = [(int(e), int(i), loss) for e, i, loss in LOSS_LINE.findall(out)]
    assert [(e, i) for e, i, _ in theirs] == [(e, i) for e in (1, 2) for i in (20, 40, 60)]
    assert theirs == ours
    overall, per_class = _accuracy_lines(out)
    assert overall == int(100 * result.eval.accuracy)
    short = dict(zip(data.classes, ("plane", "car", "bird", "cat", "deer", "dog", "frog",
                                    "horse", "ship", "truck")))
    assert per_class == {short[c]: "%.1f" % (100 * a)
                         for c, a in result.eval.per_class_accuracy.items()}

    # the saved file is the tutorial's state_dict, with the app's weights
    state = torch.load(work / "cifar_net.pth", weights_only=True)
    TutorialNet().load_state_dict(state)
    for k, v in result.model.state_dict().items():
        torch.testing.assert_close(state[k], v, rtol=0, atol=0)


def test_a_short_run_prints_its_running_loss_once_per_epoch(small, scripts):
    """LOG_EVERY 2000 (the tutorial's) on 10 mini-batches an epoch: the script prints each
    epoch's mean loss at its last mini-batch (the app prints none; its step losses agree)."""
    _, _, data = small
    config = SCRIPTS["short"][0]
    text, out, _ = scripts["short"]
    assert "LOG_EVERY = 2000" in text
    result = train(config, data, evaluate_after=False)
    assert result.running_losses == []
    means = ["%.3f" % np.mean(result.losses[k:k + 10]) for k in (0, 10)]
    assert LOSS_LINE.findall(out) == [("1", "10", means[0]), ("2", "10", means[1])]


def test_the_scripts_order_and_batches_are_the_apps(small, tmp_path):
    """Epoch by epoch: EpochShuffle draws SeededShuffle's order (torch's RandomSampler does
    not, from epoch 2 on) and the script's FastLoader serves the app's batches bit for bit."""
    _, _, data = small
    path = tmp_path / "cifar_run.py"
    path.write_text(export_script(TrainConfig(device="cpu", num_workers=0)))
    script = runpy.run_path(str(path), run_name="exported")  # defines, does not train
    ours, theirs = SeededShuffle(300, seed=7), script["EpochShuffle"](300, 7)
    sampler = torch.utils.data.RandomSampler(range(300), generator=torch.Generator().manual_seed(7))
    orders = [(list(ours), list(theirs), list(sampler)) for _ in range(3)]
    assert all(a == b for a, b, _ in orders)
    assert orders[0][2] == orders[0][0] and orders[1][2] != orders[1][0]

    images = torch.from_numpy(np.array(data.train_x))
    labels = torch.from_numpy(np.array(data.train_y))
    fast = script["FastLoader"](torch.utils.data.TensorDataset(images, labels), 32, True, 11)
    app = FastLoader(data, "train", 32, device="cpu", shuffle=True, seed=11)
    assert len(fast) == len(app) == 10
    for _ in range(2):
        for (x1, y1), (x2, y2) in zip(fast, app, strict=True):
            assert torch.equal(x1, x2) and torch.equal(y1, y2)


def test_every_config_field_is_written_even_a_new_one():
    @dataclasses.dataclass(frozen=True)
    class MoreConfig(TrainConfig):
        dropout: float = knob(0.0, kind="float", lo=0, hi=1, label="common.lr",
                              help="common.lr_help", error="config.lr")

    text = export_script(MoreConfig(dropout=0.25, lr=0.01))
    assert "\nDROPOUT = 0.25\n" in text and "this script does not use" in text
    assert "\nLEARNING_RATE = 0.01\n" in text
    for f in dataclasses.fields(TrainConfig):
        if f.name != "val_fraction":   # written only when it holds images out (below)
            assert re.search(rf"^{constant_name(f.name)} = ", text, re.M), f.name
    assert "this script does not use" not in export_script(TrainConfig())
    assert "VAL_FRACTION" not in text and "validate(" not in text
    assert "\nVAL_FRACTION = 0.2\n" in export_script(TrainConfig(val_fraction=0.2))


VAL_LINE = re.compile(r"^\[(\d+)\] validation loss: (\d+\.\d{3}), validation accuracy: "
                      r"(\d+\.\d) %$", re.M)


@pytest.mark.parametrize("pipeline", ["tutorial", "fast"])
def test_the_script_holds_out_the_apps_validation_images(pipeline, small, scripts):
    """VAL_FRACTION 0.25: the script trains on the app's training images only (the same
    losses) and prints each epoch's validation loss and accuracy, the app's."""
    _, _, data = small
    config = SCRIPTS["validation", pipeline][0]
    text, out, _ = scripts["validation", pipeline]
    assert "VAL_FRACTION = 0.25" in text
    result = train(config, data, evaluate_after=False)
    ours = [(str(r["epoch"]), str(r["i"]), "%.3f" % r["loss"]) for r in result.running_losses]
    assert LOSS_LINE.findall(out) == ours and len(ours) == 2 * 3   # 60 images: 15 steps
    assert VAL_LINE.findall(out) == [(str(e["epoch"]), "%.3f" % e["val_loss"],
                                      "%.1f" % (100 * e["val_accuracy"]))
                                     for e in result.epochs]


def test_non_default_network_filled_in_from_the_shape_trace():
    spec = ModelSpec(channels=(8, 32), kernels=(3, 3), paddings=(1, 1), pool=2,
                     hidden=(200, 100), width=1)
    text = export_script(TrainConfig(model=spec, device="auto"))
    assert "DEVICE = 'auto'" in text
    assert 'device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")' in text
    assert "self.conv1 = nn.Conv2d(3, 8, 3, padding=1)" in text
    assert "self.fc1 = nn.Linear(32 * 8 * 8, 200)" in text and "2,048 numbers" in text
    assert "x = x.view(-1, 32 * 8 * 8)" in text
    # the tutorial's network is written exactly as the tutorial writes it
    default = export_script(TrainConfig())
    assert "self.fc1 = nn.Linear(16 * 5 * 5, 120)" in default
    assert "super(Net, self).__init__()" in default and "shape trace" not in default
    assert "EPOCHS = 2" in default and "BATCH_SIZE = 4" in default and "NUM_WORKERS = 2" in default
    assert "python cifar_run.py DATA" in default
    with pytest.raises(ShapeError):
        export_script(TrainConfig(model=ModelSpec(kernels=(31, 31))))


# -- python -m cifarlab export ----------------------------------------------------------------
@pytest.fixture
def saved(tmp_path):
    config = TrainConfig(epochs=3, lr=0.02, batch_size=16, pipeline="fast", train_subset=1000,
                         seed=42, model=ModelSpec(channels=(8, 16)))
    path = tmp_path / "run.pth"
    checkpoint.save(path, LabNet(config.model), config, CIFAR10_CLASSES, {"test_accuracy": 0.4321})
    return path, config


def test_cli_export_writes_the_script_of_the_checkpoints_run(saved, tmp_path, capsys):
    path, config = saved
    out = tmp_path / "again.py"
    assert main(["export", str(path), "-o", str(out)]) == 0
    assert "again.py" in capsys.readouterr().out
    text = out.read_text()
    assert "python again.py DATA" in text and "cifar_run.py" not in text
    assert "# CIFAR Lab checkpoint (run), test accuracy 43.2%" in text
    module = runpy.run_path(str(out), run_name="exported")
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        want = value.to_dict() if f.name == "model" else value
        if f.name == "val_fraction" and not value:   # the tutorial's script: no split
            assert constant_name(f.name) not in module
            continue
        assert module[constant_name(f.name)] == want, f.name
    net = module["Net"]()
    net.load_state_dict(checkpoint.load(path).state_dict)


def test_cli_export_bad_input_exits_2_with_one_line(saved, tmp_path, capsys):
    path, _ = saved
    plain = tmp_path / "cifar_net.pth"
    torch.save(TutorialNet().state_dict(), plain)  # the tutorial's own line
    text = tmp_path / "notes.pth"
    text.write_text("not a checkpoint")
    cases = [
        ([str(tmp_path / "missing.pth")], "missing.pth"),
        ([str(text)], "notes.pth"),
        ([str(plain)], "only a network's weights"),
        ([str(path), "-o", str(tmp_path / "no" / "such" / "run.py")], "No such file"),
        ([str(path), "-o", str(tmp_path / "folder.py")], "Is a directory"),
    ]
    # a folder as -o means cifar_run.py in it (test_export_safety); here that is a folder too
    (tmp_path / "folder.py" / "cifar_run.py").mkdir(parents=True)
    for args, said in cases:
        assert main(["export", *args]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and said in err, err
    assert not (tmp_path / "no").exists()


# -- any config ---------------------------------------------------------------------------------
small_specs = st.builds(
    ModelSpec,
    channels=st.tuples(st.integers(1, 24), st.integers(1, 24)),
    kernels=st.tuples(st.integers(1, 9), st.integers(1, 9)),
    paddings=st.tuples(st.integers(0, 4), st.integers(0, 4)),
    strides=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    pool=st.integers(1, 4),
    hidden=st.tuples(st.integers(1, 64), st.integers(1, 64)),
    width=st.integers(1, 2))

configs = st.builds(
    TrainConfig,
    epochs=st.integers(1, 500), lr=st.floats(1e-6, 10, allow_nan=False),
    momentum=st.floats(0, 0.999), batch_size=st.integers(1, 65536),
    num_workers=st.integers(0, MAX_WORKERS),
    device=st.sampled_from(["auto", "cpu", "cuda:0", "cuda:3", "mps"]),
    pipeline=st.sampled_from(["tutorial", "fast"]), seed=st.integers(0, MAX_SEED),
    train_subset=st.none() | st.integers(1, 50000), shuffle=st.booleans(),
    log_every=st.integers(1, 5000), activation=st.sampled_from(ACTIVATIONS),
    val_fraction=st.sampled_from([0.0, 0.0, 0.2]) | st.floats(0, 0.5))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(config=configs, spec=small_specs, note=st.text(max_size=80),
       name=st.from_regex(r"[a-z_][a-z0-9_]{0,12}\.py", fullmatch=True))
def test_random_configs_give_valid_python_with_the_same_network(config, spec, note, name,
                                                                 tmp_path):
    config = config.replace(model=spec)
    try:
        lab = LabNet(spec, activation=config.activation)
    except ShapeError:
        with pytest.raises(ShapeError):
            export_script(config)
        return
    text = export_script(config, source_note=note, script_name=name)
    compile(text, name, "exec")
    assert "cifarlab" not in _imports(text) and f"``python {name}``" in text
    path = tmp_path / name
    path.write_text(text)
    module = runpy.run_path(str(path), run_name="exported")  # defines, does not train
    assert ("VAL_FRACTION" in module) == (config.val_fraction > 0)  # the tutorial's: no split
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name == "val_fraction" and not value:
            continue
        assert module[constant_name(f.name)] == (value.to_dict() if f.name == "model"
                                                 else value), f.name
    net = module["Net"]()
    want = {k: tuple(v.shape) for k, v in lab.state_dict().items()}
    assert {k: tuple(v.shape) for k, v in net.state_dict().items()} == want
    # the same weights give the same outputs: it is the same network, layer for layer
    net.load_state_dict(lab.state_dict())
    x = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(net(x), lab(x))
