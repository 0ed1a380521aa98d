"""The networks the ``net`` knob names, and the checks that tie the tricks together."""
from __future__ import annotations

from typing import Any, Mapping

from cifarlab.core.modelspec import ModelSpec
from cifarlab.errors import Problem

# name -> ModelSpec fields. "tutorial": the tutorial's Net (resized by ``model``); "bn3": three
# small conv blocks with batch norm, sized for the CPU (the one-minute preset); "airbench":
# airbench94's widths (64, 256, 256) and two convs a block (KellerJordan/cifar10-airbench),
# with the tutorial's fully connected head.
NETS: dict[str, dict[str, Any]] = {
    "tutorial": {},
    "bn3": dict(channels=(16, 32), kernels=(3, 3), paddings=(1, 1), conv3=64, hidden=(128, 64),
                batch_norm=True),
    "airbench": dict(channels=(64, 256), kernels=(3, 3), paddings=(1, 1), conv3=256,
                     hidden=(256, 128), batch_norm=True, block_convs=2),
}
NET_NAMES = tuple(NETS)


def net_spec(name: str) -> ModelSpec:
    """The ModelSpec of a named network ("tutorial": the tutorial's own Net)."""
    return ModelSpec(**NETS[name])


def net_fits(net: str, model: ModelSpec) -> bool:
    """Whether ``model`` is the network ``net`` names: "tutorial" takes any plain resize of the
    tutorial's Net; the others exactly their own spec."""
    return model.is_plain if net == "tutorial" else model == net_spec(net)


def trick_problems(values: Mapping[str, Any]) -> list[Problem]:
    """The network the ``net`` knob names must be the one ``model`` describes; augmentation
    works on the fast pipeline's batches (tensors in memory), never image by image."""
    out: list[Problem] = []
    net, model = values.get("net", "tutorial"), values.get("model")
    if net in NETS and isinstance(model, ModelSpec) and not net_fits(net, model):
        out.append(Problem("net", "config.net_model", {"net": net}))
    if values.get("augment") in ("flip", "flip_translate") and values.get("pipeline") != "fast":
        out.append(Problem("augment", "config.augment_pipeline", {}))
    if values.get("nesterov") is True and values.get("momentum") == 0:  # torch.optim.SGD's rule
        out.append(Problem("nesterov", "config.nesterov_momentum", {}))
    return out
