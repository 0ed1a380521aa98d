"""Issue 13, "speed as a lesson": each trick against PyTorch's own (label smoothing, Nesterov
SGD with weight decay, mirror TTA), the augmentation's flips and shifts, the one-cycle
schedule, the new network variants through the model, the shape trace and the export, the
presets' config round trips and ``train --preset`` on the command line. Tiny subsets only.
"""
import contextlib
import json
import subprocess
import sys
import tarfile

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from cifarlab.cli import build_parser, main
from cifarlab.core import checkpoint, tricks
from cifarlab.core.config import PRESETS, ModelSpec, TrainConfig, validate
from cifarlab.core.data import load
from cifarlab.core.data.pipelines import FastLoader
from cifarlab.core.evaluate import predict
from cifarlab.core.export.render import export_script
from cifarlab.core.model import Net
from cifarlab.core.modelspec import NETS, net_spec
from cifarlab.core.shapes import total_params, trace_spec
from cifarlab.core.train import make_optimizer, train
from cifarlab.errors import ConfigError
from cifarlab.lab import speed
from shape_support import trace_module

TRICKS = dict(pipeline="fast", net="bn3", augment="flip_translate", label_smoothing=0.1,
              nesterov=True, weight_decay=0.0005, schedule="onecycle", tta=True)


# -- each trick against PyTorch -----------------------------------------------------------------

def test_label_smoothing_is_pytorchs():
    logits, labels = torch.randn(16, 10), torch.randint(0, 10, (16,))
    for eps in (0.0, 0.1, 0.2):
        got = tricks.make_criterion(TrainConfig(label_smoothing=eps))(logits, labels)
        torch.testing.assert_close(got, F.cross_entropy(logits, labels, label_smoothing=eps),
                                   rtol=0, atol=0)
    assert TrainConfig().label_smoothing == 0.0  # the tutorial's plain loss by default


@pytest.mark.parametrize("pipeline", ["tutorial", "fast"])
def test_nesterov_and_weight_decay_are_pytorchs_sgd(pipeline):
    config = TrainConfig(pipeline=pipeline, nesterov=True, weight_decay=0.01, lr=0.1,
                         momentum=0.85)
    torch.manual_seed(0)
    ours = nn.Linear(5, 3)
    theirs, heavy = nn.Linear(5, 3), nn.Linear(5, 3)
    theirs.load_state_dict(ours.state_dict())
    heavy.load_state_dict(ours.state_dict())
    opt = make_optimizer(config, ours, torch.device("cpu"))
    ref = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.85, nesterov=True,
                          weight_decay=0.01)
    plain_momentum = torch.optim.SGD(heavy.parameters(), lr=0.1, momentum=0.85,
                                     weight_decay=0.01)
    assert opt.param_groups[0]["nesterov"] and opt.param_groups[0]["weight_decay"] == 0.01
    for _ in range(5):
        x = torch.randn(8, 5)
        for model, o in ((ours, opt), (theirs, ref), (heavy, plain_momentum)):
            o.zero_grad()
            model(x).square().sum().backward()
            o.step()
    for a, b, c in zip(ours.parameters(), theirs.parameters(), heavy.parameters()):
        # the fused kernel (fast pipeline) sums in another order: within float rounding
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
        assert (a - c).abs().max() > 1e-3  # not the heavy-ball momentum
    plain = make_optimizer(TrainConfig(), nn.Linear(2, 2), torch.device("cpu"))
    assert not plain.param_groups[0]["nesterov"] and plain.param_groups[0]["weight_decay"] == 0


def test_tta_is_the_mean_of_the_model_and_its_mirror():
    torch.manual_seed(0)
    model = Net(net_spec("bn3")).eval()
    images = torch.randint(0, 256, (6, 3, 32, 32), dtype=torch.uint8)
    x = images.float() / 255 * 2 - 1
    with torch.no_grad():
        want = torch.softmax((model(x) + model(torch.flip(x, dims=[3]))) / 2, dim=1)
        plain = torch.softmax(model(x), dim=1)
    torch.testing.assert_close(torch.from_numpy(predict(model, images, tta=True)), want,
                               rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(torch.from_numpy(predict(model, images)), plain,
                               rtol=1e-5, atol=1e-6)


def test_flip_mirrors_some_images_exactly_and_keeps_the_rest():
    x = torch.randn(64, 3, 32, 32)
    out = tricks.BatchAugment("flip", seed=5)(x)
    assert out.shape == x.shape
    flipped = [bool(torch.equal(o, xi.flip(-1))) for o, xi in zip(out, x)]
    kept = [bool(torch.equal(o, xi)) for o, xi in zip(out, x)]
    assert all(f != k for f, k in zip(flipped, kept))  # each exactly one of the two
    assert 10 < sum(flipped) < 54
    # the same seed gives the same flips; another seed others
    assert torch.equal(tricks.BatchAugment("flip", seed=5)(x), out)
    assert not torch.equal(tricks.BatchAugment("flip", seed=6)(x), out)
    assert torch.equal(tricks.BatchAugment("none")(x), x)


def test_translate_takes_a_window_of_the_reflect_padded_mirror_or_image():
    x = torch.randn(24, 3, 32, 32)
    out = tricks.BatchAugment("flip_translate", seed=1)(x)
    assert out.shape == x.shape
    shifts = set()
    for o, xi in zip(out, x):
        found = None
        for img in (xi, xi.flip(-1)):
            p = F.pad(img[None], (2, 2, 2, 2), mode="reflect")[0]
            for dy in range(5):
                for dx in range(5):
                    if torch.equal(p[:, dy:dy + 32, dx:dx + 32], o):
                        found = (dy, dx)
        assert found is not None
        shifts.add(found)
    assert len(shifts) > 5  # the shifts vary


def test_fast_loader_augments_on_the_batch_and_keeps_labels(tiny_folder, tmp_path):
    data = load(str(tiny_folder), cache_dir=tmp_path / "cache")
    plain = FastLoader(data, "train", 5, seed=3)
    aug = FastLoader(data, "train", 5, seed=3, augment="flip")
    for (xa, ya), (xb, yb) in zip(plain, aug):
        assert torch.equal(ya, yb) and xa.shape == xb.shape and xb.dtype == torch.float32
        for a, b in zip(xa, xb):
            assert torch.equal(a, b) or torch.equal(a.flip(-1), b)


def test_onecycle_rises_to_the_learning_rate_then_falls():
    total = 100
    f = [tricks.onecycle_factor(s, total) for s in range(total + 1)]
    assert f[0] == pytest.approx(0.2) and f[23] == pytest.approx(1.0)
    assert f[100] == pytest.approx(0.07) and max(f) == pytest.approx(1.0)
    assert all(a < b for a, b in zip(f[:23], f[1:24]))
    assert all(a > b for a, b in zip(f[23:], f[24:]))
    opt = torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.5)
    sched = tricks.make_scheduler(TrainConfig(schedule="onecycle", lr=0.5), opt, total)
    lrs = []
    for _ in range(30):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs == pytest.approx([0.5 * tricks.onecycle_factor(s, total) for s in range(30)])
    assert tricks.make_scheduler(TrainConfig(), opt, total) is None


# -- the networks ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(NETS))
def test_networks_match_their_shape_trace(name):
    spec = net_spec(name)
    net = Net(spec)
    assert sum(p.numel() for p in net.parameters()) == total_params(trace_spec(spec))
    real = {t.name: t.out_shape for t in trace_module(net)}
    for t in trace_spec(spec):
        if t.kind in ("conv", "batchnorm", "linear"):
            assert real[t.name] == t.out_shape, t.name
    assert net(torch.zeros(2, 3, 32, 32)).shape == (2, 10)


def test_tutorial_net_keeps_its_keys_and_bn3_adds_batch_norm():
    assert list(Net().state_dict()) == ["conv1.weight", "conv1.bias", "conv2.weight",
                                        "conv2.bias", "fc1.weight", "fc1.bias", "fc2.weight",
                                        "fc2.bias", "fc3.weight", "fc3.bias"]
    kinds = [t.kind for t in trace_spec(net_spec("bn3"))]
    assert kinds.count("batchnorm") == 3 and kinds.count("conv") == 3 and kinds.count("pool") == 3
    assert any(isinstance(m, nn.BatchNorm2d) for m in Net(net_spec("airbench")).modules())


# -- the config --------------------------------------------------------------------------------

def test_defaults_are_the_tutorials_and_presets_round_trip():
    d = TrainConfig()
    assert (d.net, d.augment, d.label_smoothing, d.nesterov, d.weight_decay, d.schedule,
            d.tta) == ("tutorial", "none", 0.0, False, 0.0, "constant", False)
    assert d.model == ModelSpec() and d.model.is_tutorial
    for name in ("one_minute_cpu", "gpu_fast"):
        p = PRESETS[name]
        assert TrainConfig.from_dict(json.loads(json.dumps(p.to_dict()))) == p
        assert p.model == net_spec(p.net) and validate(p) == []
    cfg = TrainConfig(**TRICKS)
    assert cfg.model == net_spec("bn3")
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg


def test_the_ablations_last_row_is_the_one_minute_preset():
    last = speed.row_configs()[-1][1]
    assert last == PRESETS["one_minute_cpu"].replace(seed=last.seed, device=last.device)


def test_tricks_that_do_not_fit_are_refused():
    codes = {p.code for p in validate({"augment": "flip"})}
    assert codes == {"config.augment_pipeline"}
    assert {p.code for p in validate({"nesterov": True, "momentum": 0.0})} == \
        {"config.nesterov_momentum"}
    assert {p.code for p in validate({"net": "bn3", "model": {"channels": [8, 8]}})} == \
        {"config.net_model"}
    assert {p.code for p in validate({"net": "tutorial", "model": net_spec("bn3").to_dict()})} \
        == {"config.net_model"}
    assert {p.code for p in validate({"label_smoothing": 1.0, "augment": "rotate"})} == \
        {"config.label_smoothing", "config.augment"}
    with pytest.raises(ConfigError) as err:
        TrainConfig(schedule="cosine")
    assert err.value.problems[0].field == "schedule"
    assert "fast pipeline" in validate({"augment": "flip"})[0].text("en")
    flip = validate({"augment": "flip"})[0]
    assert flip.text("es") != flip.text("pt")


# -- a tiny real run, its exported script, the command line -------------------------------------

@pytest.fixture(scope="module")
def small(cifar_data, tmp_path_factory):
    """(folder, archive, CifarData): 16 train and 8 test images a class of the real CIFAR-10."""
    from PIL import Image

    base = tmp_path_factory.mktemp("speed-cifar")
    folder = base / "cifar10"
    for split, k in (("train", 16), ("test", 8)):
        x, y = cifar_data.split(split)
        for c, name in enumerate(cifar_data.classes):
            (folder / split / name).mkdir(parents=True)
            for j, i in enumerate(np.flatnonzero(np.asarray(y) == c)[:k]):
                Image.fromarray(np.ascontiguousarray(x[i].transpose(1, 2, 0))).save(
                    folder / split / name / f"{j:04d}.png")
    archive = base / "speed-cifar.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname="cifar10")
    return folder, archive, load(str(archive), cache_dir=base / "cache")


@contextlib.contextmanager
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def test_exported_script_repeats_a_run_with_every_trick(small, tmp_path):
    folder, _, data = small
    config = TrainConfig(epochs=2, batch_size=32, train_subset=128, log_every=2, device="cpu",
                         seed=4, lr=0.05, **TRICKS)
    with one_thread():
        result = train(config, data, checkpoint_path=tmp_path / "lab.pth")
    ckpt = checkpoint.load(tmp_path / "lab.pth")   # batch norm's counters load too
    assert ckpt.config == config and "bn1.num_batches_tracked" in ckpt.state_dict
    script = tmp_path / "run.py"
    script.write_text(export_script(config, script_name="run.py"))
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run([sys.executable, str(script), str(folder)], cwd=work,
                          capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                               "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    import re

    theirs = re.findall(r"^\[(\d+), +(\d+)\] loss: (\d+\.\d{3})$", proc.stdout, re.M)
    ours = [(str(r["epoch"]), str(r["i"]), "%.3f" % r["loss"]) for r in result.running_losses]
    assert theirs == ours and len(ours) == 4
    state = torch.load(work / "cifar_net.pth", weights_only=True)
    for k, v in result.model.state_dict().items():
        torch.testing.assert_close(state[k], v, rtol=0, atol=0)
    overall = re.search(r"on the 80 test images: (\d+) %", proc.stdout)
    assert overall and int(overall.group(1)) == int(100 * result.eval.accuracy)


def test_cli_preset_with_overrides(small, tmp_path, capsys):
    _, archive, _ = small
    assert {"one_minute_cpu", "gpu_fast"} <= set(
        build_parser()._subparsers._group_actions[0].choices["train"]
        ._option_string_actions["--preset"].choices)
    help_text = build_parser()._subparsers._group_actions[0].choices["train"].format_help()
    assert "one_minute_cpu" in help_text and "gpu_fast" in help_text
    rc = main(["train", "--preset", "gpu_fast", "--epochs", "1", "--train-subset", "64",
               "--batch-size", "32", "--device", "cpu", "--data", str(archive),
               "--out", str(tmp_path / "g.pth"), "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    cfg = out["config"]
    assert (cfg["epochs"], cfg["train_subset"], cfg["batch_size"]) == (1, 64, 32)  # overridden
    assert (cfg["net"], cfg["augment"], cfg["schedule"], cfg["tta"], cfg["label_smoothing"]) \
        == ("airbench", "flip_translate", "onecycle", True, 0.2)  # from the preset
    assert cfg["model"]["block_convs"] == 2 and out["steps"] == 2
    assert 0 <= out["test_accuracy"] <= 1
    with pytest.raises(SystemExit):
        main(["train", "--preset", "nope"])
