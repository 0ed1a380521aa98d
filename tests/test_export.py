"""cifarlab.core.export: the exported script runs on its own, trains, saves the tutorial's state_dict,
reproduces the app's losses, and is valid Python with the right network for any config."""
import ast
import re
import runpy
import subprocess
import sys

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from cifarlab.core.config import ModelSpec, TrainConfig
from cifarlab.errors import ShapeError
from cifarlab.core.export import export_script
from cifarlab.core.model import Net as LabNet
from cifarlab.core.train import train
from tutorial_net import Net as TutorialNet

SMALL = TrainConfig(epochs=1, train_subset=200, batch_size=32, num_workers=0, log_every=2,
                    device="cpu", pipeline="tutorial", seed=3)


def _imports(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add((node.module or "").split(".")[0])
    return names


def test_exported_script_trains_saves_and_reproduces_the_run(tmp_path, cifar_archive,
                                                            cifar_data):
    script = tmp_path / "cifar_run.py"
    script.write_text(export_script(SMALL, source_note="run 0123 on the test server\nsecond"))
    text = script.read_text()
    assert "cifarlab" not in _imports(text)
    assert "# run 0123 on the test server\n# second\n" in text
    assert "TRAIN_SUBSET = 200" in text and "LEARNING_RATE = 0.001" in text
    assert 'device = torch.device("cpu")' in text
    assert "torch.save(net.state_dict(), PATH)" in text

    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run([sys.executable, str(script), str(cifar_archive)], cwd=work,
                          capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    lines = re.findall(r"^\[1, +(\d+)\] loss: (\d+\.\d{3})$", out, re.M)
    assert [int(i) for i, _ in lines] == [2, 4, 6]  # 200 images / 32 = 7 steps, every 2nd
    assert "Finished Training" in out
    acc = re.search(r"Accuracy of the network on the 10000 test images: (\d+) %", out)
    assert acc and 0 <= int(acc.group(1)) <= 100
    assert len(re.findall(r"^Accuracy for class: \w+ +is \d+\.\d %$", out, re.M)) == 10

    # the saved file is the tutorial's state_dict: it loads into the tutorial's own Net
    state = torch.load(work / "cifar_net.pth", weights_only=True)
    TutorialNet().load_state_dict(state)

    # and it reproduces the app's run: same images, order, initial weights, so same losses
    events = []
    train(SMALL, cifar_data, on_event=events.append, evaluate_after=False)
    ours = ["%.3f" % e.data["loss"] for e in events if e.kind == "running_loss"]
    assert ours == [loss for _, loss in lines]


def test_non_default_network_filled_in_from_the_shape_trace():
    spec = ModelSpec(channels=(8, 32), kernels=(3, 3), paddings=(1, 1), pool=2,
                     hidden=(200, 100), width=1)
    text = export_script(TrainConfig(model=spec, device="auto"))
    assert 'device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")' in text
    assert "self.conv1 = nn.Conv2d(3, 8, 3, padding=1)" in text
    assert "self.fc1 = nn.Linear(32 * 8 * 8, 200)" in text and "2,048 numbers" in text
    assert "x = x.view(-1, 32 * 8 * 8)" in text
    # the tutorial's network is written exactly as the tutorial writes it
    default = export_script(TrainConfig())
    assert "self.fc1 = nn.Linear(16 * 5 * 5, 120)" in default
    assert "super(Net, self).__init__()" in default and "shape trace" not in default
    assert "EPOCHS = 2" in default and "BATCH_SIZE = 4" in default and "NUM_WORKERS = 2" in default
    with pytest.raises(ShapeError):
        export_script(TrainConfig(model=ModelSpec(kernels=(31, 31))))


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
    num_workers=st.integers(0, 64), device=st.sampled_from(["auto", "cpu", "cuda:0", "cuda:3",
                                                             "mps"]),
    pipeline=st.sampled_from(["tutorial", "fast"]), seed=st.integers(0, 2 ** 63 - 1),
    train_subset=st.none() | st.integers(1, 50000), shuffle=st.booleans(),
    log_every=st.integers(1, 5000))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(config=configs, spec=small_specs, note=st.text(max_size=80))
def test_random_configs_give_valid_python_with_the_same_network(config, spec, note, tmp_path):
    config = config.replace(model=spec)
    try:
        lab = LabNet(spec)
    except ShapeError:
        with pytest.raises(ShapeError):
            export_script(config)
        return
    text = export_script(config, source_note=note)
    compile(text, "cifar_run.py", "exec")
    assert "cifarlab" not in _imports(text)
    path = tmp_path / "cifar_run.py"
    path.write_text(text)
    module = runpy.run_path(str(path), run_name="exported")  # defines, does not train
    assert module["EPOCHS"] == config.epochs and module["LEARNING_RATE"] == config.lr
    assert module["MOMENTUM"] == config.momentum and module["SEED"] == config.seed
    assert module["BATCH_SIZE"] == config.batch_size and module["SHUFFLE"] == config.shuffle
    assert module["TRAIN_SUBSET"] == config.train_subset
    assert module["LOG_EVERY"] == config.log_every
    net = module["Net"]()
    want = {k: tuple(v.shape) for k, v in lab.state_dict().items()}
    assert {k: tuple(v.shape) for k, v in net.state_dict().items()} == want
    # the same weights give the same outputs: it is the same network, layer for layer
    net.load_state_dict(lab.state_dict())
    x = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(net(x), lab(x))
