"""Inside training: every ``every`` steps, each layer's weight and gradient norms, a weight
histogram and its silent ReLUs; read back once per sample, never per step."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from cifarlab.i18n import finite

HIST_BINS = 16
SAMPLES_PER_EPOCH = 50      # enough points for a curve, few enough to cost nothing
EXPLODING_RATIO = 100.0     # a gradient norm this many times its first one
VANISHING_RATIO = 1e-4      # a gradient norm this small against its weights' norm
DEAD_SHARE = 0.5            # at least this share of a layer's ReLUs silent on the batch


def probe_every(steps_per_epoch: int) -> int:
    """Steps between two samples: about SAMPLES_PER_EPOCH a epoch, at least every 10 steps."""
    return max(10, steps_per_epoch // SAMPLES_PER_EPOCH)


class Probe:
    """The samples of one model's Conv2d and Linear layers. Where a ReLU takes each output as it
    is (no batch norm between), a unit <= 0 on every image is a ReLU that never fired."""

    def __init__(self, model: nn.Module, every: int):
        self.model, self.every = model, max(1, int(every))
        self.layers = [(name, m) for name, m in model.named_modules()
                       if isinstance(m, (nn.Conv2d, nn.Linear))]
        relu = getattr(model, "act", F.relu) is F.relu and not any(
            isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
        self.hooked = self.layers[:-1] if relu else []

    def due(self, step: int) -> bool:
        return step % self.every == 0

    def sample(self, step: int, inputs: torch.Tensor) -> dict:
        """The layers' numbers now (after a step, its gradients still in ``.grad``)."""
        outputs: dict[str, torch.Tensor] = {}
        if self.hooked:
            hooks = [m.register_forward_hook(lambda _m, _i, out, name=name: outputs.__setitem__(
                name, out.detach())) for name, m in self.hooked]
            try:
                with torch.no_grad():
                    self.model(inputs)
            finally:
                for h in hooks:
                    h.remove()
        layers = []
        for name, m in self.layers:
            w = m.weight.detach().float()
            g = m.weight.grad
            lo, hi = float(w.min()), float(w.max())
            in_range = math.isfinite(lo) and math.isfinite(hi)
            row = {"name": name, "weight_norm": w.norm(), "grad_norm":
                   g.detach().float().norm() if g is not None else None,
                   "hist": torch.histc(w, bins=HIST_BINS, min=lo, max=hi) if in_range else None,
                   "range": (lo, hi) if in_range else None}
            if name in outputs:   # a unit (channel) that is <= 0 for every image of the batch
                out = outputs[name]
                per_unit = out.transpose(0, 1).reshape(out.shape[1], -1)
                row["dead"] = (per_unit <= 0).all(dim=1).float().mean()
            layers.append(row)
        return {"step": int(step), "layers": [_plain(r) for r in layers]}


def _plain(row: dict) -> dict:
    """Tensors to JSON numbers (one read-back per value; once per sample, not per step)."""
    out = {}
    for k, v in row.items():
        if isinstance(v, torch.Tensor):
            v = v.tolist()
        elif isinstance(v, tuple):
            v = list(v)
        if isinstance(v, float) and not math.isfinite(v):
            v = str(v)          # JSON has no nan/inf: kept as text, read as no number
        out[k] = v
    return out


def signals(samples: list[dict]) -> list[tuple[str, dict]]:
    """What the latest sample says a student should know, as (code, parameters): exploding,
    vanishing gradients, or dead ReLUs."""
    if not samples:
        return []
    first, last, out = samples[0]["layers"], samples[-1]["layers"], []
    for f, row in zip(first, last):
        g, g0, w = finite(row.get("grad_norm")), finite(f.get("grad_norm")), \
            finite(row.get("weight_norm"))
        if g is None and row.get("grad_norm") is not None:
            out.append(("exploding", {"layer": row["name"], "ratio": "∞"}))
        elif g is not None and g0 and len(samples) > 1 and g > EXPLODING_RATIO * g0:
            out.append(("exploding", {"layer": row["name"], "ratio": round(g / g0)}))
        elif g is not None and w and g < VANISHING_RATIO * w:
            out.append(("vanishing", {"layer": row["name"], "grad": g, "weight": w}))
        dead = finite(row.get("dead"))
        if dead is not None and dead >= DEAD_SHARE:
            out.append(("dead", {"layer": row["name"], "share": dead}))
    return out
