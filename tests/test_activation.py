"""The activation knob: ReLU (the tutorial's), sigmoid and tanh, from the config to the model,
the checkpoint, the Train form and the Network page's lesson, checked against torch.nn."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from cifarlab import i18n
from cifarlab.core import checkpoint
from cifarlab.core.config import ACTIVATIONS, TrainConfig
from cifarlab.core.model import Net
from cifarlab.core.train import train
from cifarlab.errors import ConfigError
from cifarlab.lab.network import figures as F
from cifarlab.lab.train_form import TrainForm
from tutorial_net import Net as TutorialNet

MODULES = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh}


class ByModules(TutorialNet):
    """The tutorial's Net with its F.relu swapped for a torch.nn activation module."""

    def __init__(self, module: type[nn.Module]):
        super().__init__()
        self.a = module()

    def forward(self, x):
        x = self.pool(self.a(self.conv1(x)))
        x = self.pool(self.a(self.conv2(x)))
        x = x.view(-1, 16 * 5 * 5)
        return self.fc3(self.a(self.fc2(self.a(self.fc1(x)))))


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_the_net_applies_the_knobs_function_and_keeps_the_tutorials_weights(name):
    torch.manual_seed(0)
    ours = Net(activation=name)
    theirs = ByModules(MODULES[name])
    theirs.load_state_dict(ours.state_dict())   # the same keys and shapes for every activation
    x = torch.randn(3, 3, 32, 32)
    torch.testing.assert_close(ours(x), theirs(x))
    tutorial = TutorialNet()                     # F.relu, as the tutorial writes it
    tutorial.load_state_dict(ours.state_dict())
    assert torch.allclose(tutorial(x), ours(x)) == (name == "relu")
    assert Net().act is ours.act if name == "relu" else Net().act is not ours.act

def test_the_config_field_defaults_to_relu_and_refuses_others_in_the_language():
    assert TrainConfig().activation == "relu" and ACTIVATIONS[0] == "relu"
    cfg = TrainConfig(activation="tanh")
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg and "activation tanh" in cfg.describe()
    old = TrainConfig().to_dict()
    del old["activation"]                        # a run stored before the knob existed
    assert TrainConfig.from_dict(old).activation == "relu"
    with pytest.raises(ConfigError) as err:
        TrainConfig(activation="softplus")
    (problem,) = err.value.problems
    assert problem.field == "activation" and "relu, sigmoid o tanh" in problem.text("es")


def test_a_checkpoint_brings_back_the_activation(tmp_path):
    torch.manual_seed(1)
    net = Net(activation="sigmoid")
    path = checkpoint.save(tmp_path / "s.pth", net, TrainConfig(activation="sigmoid"),
                           [str(i) for i in range(10)])
    back = checkpoint.load(path).model()
    x = torch.randn(2, 3, 32, 32)
    assert back.act is torch.sigmoid
    torch.testing.assert_close(back(x), net(x))


def test_training_uses_the_activation(cifar_data):
    cfg = TrainConfig(epochs=1, train_subset=64, batch_size=32, num_workers=0, pipeline="fast",
                      device="cpu")
    relu = train(cfg, cifar_data, evaluate_after=False)
    tanh = train(cfg.replace(activation="tanh"), cifar_data, evaluate_after=False)
    assert tanh.model.act is torch.tanh and relu.model.act is torch.nn.functional.relu
    assert tanh.losses != relu.losses


def test_the_train_form_offers_it_in_advanced_in_each_language():
    for lang in i18n.LANGUAGES:
        (w,) = [w for w in TrainForm(lang).widgets() if w.name == "activation"]
        assert w.advanced and w.options == ACTIVATIONS
        assert w.option_labels[0] == i18n.t("common.activation_relu", lang)


def test_the_lessons_figure_and_numbers_come_from_autograd():
    curves = F.activation_curves()
    x, y, dy = (torch.tensor(v, dtype=torch.float64) for v in curves["sigmoid"])
    torch.testing.assert_close(dy, y * (1 - y))                         # σ' = σ(1 − σ)
    x, y, dy = (torch.tensor(v, dtype=torch.float64) for v in curves["tanh"])
    torch.testing.assert_close(dy, 1 - y ** 2)
    assert max(dy) == pytest.approx(1) == max(curves["relu"][2])        # sigmoid's: 0.25
    t = i18n.translator("es")
    fig = F.activation_figure(t)
    assert len(fig.data) == 6 and fig.data[0].name == t("common.activation_relu")


def test_never_fired_is_asked_only_of_a_relu_net():
    from cifarlab.core.probes import Probe

    assert Probe(Net(), 1).hooked and not Probe(Net(activation="sigmoid"), 1).hooked
