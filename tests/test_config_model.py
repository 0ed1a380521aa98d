"""Config validation, devices and the model's fidelity to the tutorial's Net."""
import dataclasses
import json

import pytest
import torch

from cifarlab.core.config import ModelSpec, TrainConfig, validate
from cifarlab.core.devices import Stopwatch, device_ids, environment, list_devices, resolve_device
from cifarlab.errors import ConfigError, DeviceError, ShapeError
from cifarlab.core.model import Net, count_params
from tutorial_net import Net as TutorialNet


def test_defaults_are_the_tutorial():
    c = TrainConfig()
    assert (c.epochs, c.lr, c.momentum, c.batch_size, c.num_workers) == (2, 0.001, 0.9, 4, 2)
    assert c.pipeline == "tutorial" and c.model.is_tutorial and c.log_every == 2000


def test_config_is_frozen_and_round_trips_through_json():
    c = TrainConfig(lr=0.01, batch_size=64, train_subset=1000,
                    model=ModelSpec(channels=(8, 32), width=2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.lr = 1.0  # frozen
    again = TrainConfig.from_dict(json.loads(json.dumps(c.to_dict())))
    assert again == c and again.model.channels == (8, 32)


@pytest.mark.parametrize("field,value,words", [
    ("lr", 0, "greater than 0"),
    ("lr", -0.1, "greater than 0"),
    ("lr", float("nan"), "greater than 0"),
    ("batch_size", 0, "from 1 to 65,536"),
    ("epochs", 0, "from 1 to 500"),
    ("momentum", 1.0, "below 1"),
    ("momentum", -0.5, "at least 0"),
    ("num_workers", -1, "from 0 to 8"),
    ("num_workers", 64, "from 0 to 8"),
    ("device", "gpu", "cuda:N"),
    ("pipeline", "turbo", "the tutorial's pipeline or the fast one"),
    ("train_subset", 0, "at least 1"),
    ("epochs", 2.5, "whole number"),
])
def test_each_bad_value_is_refused_with_a_readable_message(field, value, words):
    with pytest.raises(ConfigError) as info:
        TrainConfig(**{field: value})
    assert field in info.value.texts()
    assert words in info.value.texts()[field]
    assert {p.field: p.text() for p in validate({field: value})}[field] \
        == info.value.texts()[field]
    for lang in ("es", "pt"):   # the same problem, in the student's language
        assert info.value.texts(lang)[field] != info.value.texts()[field]


def test_all_bad_values_are_reported_at_once():
    errors = validate({"lr": -1, "batch_size": 0, "momentum": 2})
    assert {p.field for p in errors} == {"lr", "batch_size", "momentum"}
    assert validate({"lr": 0.01}) == []


def test_runtime_checks_batch_against_data_and_device():
    with pytest.raises(ConfigError) as info:
        TrainConfig(batch_size=64, train_subset=10).check_runtime(n_train=50_000)
    assert "larger than the training data" in info.value.texts()["batch_size"]
    with pytest.raises(ConfigError):
        TrainConfig(batch_size=128).check_runtime(n_train=100)
    TrainConfig(batch_size=100).check_runtime(n_train=100)  # exactly fits


def test_devices_listed_and_absent_device_refused():
    ids = device_ids()
    assert ids[0] == "cpu" and all(d.name for d in list_devices())
    missing = f"cuda:{torch.cuda.device_count() + 3}"
    with pytest.raises(DeviceError) as info:
        resolve_device(missing)
    assert missing in str(info.value) and "cpu" in str(info.value)
    with pytest.raises(DeviceError):
        TrainConfig(device=missing).check_runtime()
    expected = "cuda" if torch.cuda.is_available() else (
        "mps" if "mps" in ids else "cpu")
    assert resolve_device("auto").type == expected


def test_stopwatch_and_environment():
    with Stopwatch("cpu") as sw:
        torch.ones(256, 256) @ torch.ones(256, 256)
    assert sw.seconds > 0
    env = environment("cpu")
    assert env["torch"] == torch.__version__ and env["cpu_count"] >= 1 and env["device"] == "cpu"


def test_default_net_matches_the_tutorial_layer_for_layer():
    ours, theirs = Net(), TutorialNet()
    assert [(k, v.shape) for k, v in ours.state_dict().items()] == \
        [(k, v.shape) for k, v in theirs.state_dict().items()]
    assert count_params(ours) == count_params(theirs) == 62006
    # weights move both ways and give the same outputs
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(7, 3, 32, 32)
    torch.testing.assert_close(ours(x), theirs(x))
    ours2 = Net()
    ours2.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(ours2(x), theirs(x))


@pytest.mark.parametrize("spec", [
    ModelSpec(kernels=(3, 3)),
    ModelSpec(paddings=(2, 2)),
    ModelSpec(strides=(2, 1), kernels=(3, 3)),
    ModelSpec(width=4),
    ModelSpec(channels=(12, 24), hidden=(64, 32), pool=1, kernels=(5, 5)),
])
def test_variants_get_fc1_input_from_the_shape_trace(spec):
    net = Net(spec)
    out = net(torch.zeros(2, 3, 32, 32))
    assert out.shape == (2, 10)
    first = net.pool(torch.relu(net.conv1(torch.zeros(1, 3, 32, 32))))
    feats = net.pool(torch.relu(net.conv2(first)))
    assert net.fc1.in_features == feats.numel()


def test_stack_that_does_not_fit_raises_a_shape_error_naming_the_layer():
    with pytest.raises(ShapeError) as info:
        Net(ModelSpec(kernels=(5, 15)))
    assert "conv2" in str(info.value)


def test_model_spec_validation():
    with pytest.raises(ConfigError) as info:
        ModelSpec(width=0)
    assert "model.width" in info.value.texts()
    with pytest.raises(ConfigError):
        ModelSpec(kernels=(5,))
