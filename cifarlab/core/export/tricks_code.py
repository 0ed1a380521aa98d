'''The exported code of issue 13's tricks: what fills the pieces' ``<<marks>>`` for a run
that uses them, and nothing for the tutorial's (its script stays the tutorial's text).

    trick_parts(config)      # {"augment_class": ..., "criterion_args": "", ...}
    net_source(spec)         # class Net with batch norm, a third block, two convs a block
    used_fields(config)      # the config fields the script's code reads for these tricks

Each piece repeats ``cifarlab.core.tricks`` and ``cifarlab.core.model`` operation for
operation (the same random draws, the same float operations), so the script repeats the
run (tests/test_speed.py checks it on a tiny one).
'''
from __future__ import annotations

from cifarlab.core.config import ModelSpec, TrainConfig
from cifarlab.core.export.pieces import conv_code
from cifarlab.core.shapes import trace_spec

AUGMENT_CLASS = '''\
class BatchAugment:
    """Random mirror images (and shifts of up to 2 pixels, reflect padding) of a whole batch on
    the device, as airbench94 does; the random numbers come from their own generator."""

    def __init__(self, kind, seed):
        self.kind = kind
        self.generator = torch.Generator().manual_seed(seed + 2)

    def __call__(self, x):
        n, c, h, w = x.shape
        flip = torch.rand(n, generator=self.generator) < 0.5
        x = torch.where(flip.to(x.device).view(n, 1, 1, 1), x.flip(3), x)
        if self.kind != 'flip_translate':
            return x
        shifts = torch.randint(0, 5, (n, 2), generator=self.generator)
        rows = (shifts[:, :1] + torch.arange(h)).to(x.device)
        cols = (shifts[:, 1:] + torch.arange(w)).to(x.device)
        padded = F.pad(x, (2, 2, 2, 2), mode='reflect')
        padded = padded.gather(2, rows.view(n, 1, h, 1).expand(n, c, h, w + 4))
        return padded.gather(3, cols.view(n, 1, 1, w).expand(n, c, h, w))


'''

SCHEDULER = '''\
total_steps = EPOCHS * len(trainloader)

def onecycle(step):
    """airbench94's learning-rate factor: 0.2 at the start, 1 at 23 % of the steps, 0.07 at
    the end, linear in between."""
    peak = int(0.23 * total_steps)
    if step < peak:
        return 0.2 + (1.0 - 0.2) * step / peak
    return 1.0 + (0.07 - 1.0) * (step - peak) / max(1, total_steps - peak)

scheduler = optim.lr_scheduler.LambdaLR(optimizer, onecycle)
'''


TRICK_FIELDS = {"net", "augment", "label_smoothing", "nesterov", "weight_decay", "schedule",
                "tta"}


def used_fields(config: TrainConfig) -> set[str]:
    """The trick settings the script follows: its code is written for their values (the
    tutorial's code for the tutorial's; ``net`` is the class Net written out)."""
    return set(TRICK_FIELDS)


def trick_parts(config: TrainConfig) -> dict[str, str]:
    """The marks' texts for this run (all empty for the tutorial's settings)."""
    aug = config.augment != "none"
    bn = config.model.batch_norm
    return {
        "augment_class": AUGMENT_CLASS if aug else "",
        "augment_init": "self.augment = BatchAugment(AUGMENT, seed)\n        " if aug else "",
        "augment_call": "self.augment(" if aug else "",
        "augment_end": ")" if aug else "",
        "criterion_args": "label_smoothing=LABEL_SMOOTHING" if config.label_smoothing else "",
        "sgd_args": ("\n" + " " * 22 + "nesterov=NESTEROV, weight_decay=WEIGHT_DECAY,"
                     if config.nesterov or config.weight_decay else ""),
        "scheduler": ("# the learning rate changes every step: one cycle (see SCHEDULE)\n"
                      + SCHEDULER) if config.schedule == "onecycle" else "",
        "scheduler_step": "        scheduler.step()\n" if config.schedule == "onecycle" else "",
        # as core.graphs: a graph replays the learning rate it captured, so no graph with a schedule
        "graphed": ("# CUDA_GRAPHS: the whole step replayed as one CUDA graph where it can be "
                    "(class GraphedStep)\n"
                    "graphed = GraphedStep(net, criterion, optimizer, BATCH_SIZE, fast) "
                    "if CUDA_GRAPHS else None\n") if config.schedule == "constant" else
                   ("# a CUDA graph would replay the learning rate it captured, and the schedule\n"
                    "# changes it every step: every step runs as below\n"
                    "graphed = None\n"),
        "eval_mode": ("net.eval()  # batch norm: use the statistics learned in training\n"
                      if bn else ""),
        "predict": ("0.5 * net(images) + 0.5 * net(images.flip(3))  # and the mirror (TTA)"
                    if config.tta else "net(images)"),
    }


def net_source(spec: ModelSpec) -> str:
    """``class Net`` for a spec with batch norm, a third conv block or two convs a block; the
    modules are created in ``core.model.Net``'s order (the same initial weights)."""
    traces = trace_spec(spec)  # ShapeError if some layer does not fit
    flat = next(t for t in traces if t.kind == "flatten")
    c, h, w = flat.in_shape
    (c1, c2), (h1, h2) = spec.scaled_channels(), spec.scaled_hidden()
    c3 = spec.conv3 * spec.width
    blocks = [("1", c1), ("2", c2)] + ([("3", c3)] if spec.conv3 else [])

    def conv(cin: int, cout: int, i: int) -> str:
        return conv_code(spec, cin, cout, i)

    init = [f"self.conv1 = {conv(3, c1, 0)}", f"self.pool = nn.MaxPool2d({spec.pool}, {spec.pool})",
            f"self.conv2 = {conv(c1, c2, 1)}"]
    forward = []
    for i, ch in blocks:
        if i == "3":
            init.append(f"self.conv3 = nn.Conv2d({c2}, {c3}, 3, padding=1)")
        if spec.batch_norm:
            init.append(f"self.bn{i} = nn.BatchNorm2d({ch})")
        if spec.block_convs == 2:
            init.append(f"self.conv{i}b = nn.Conv2d({ch}, {ch}, 3, padding=1)")
            if spec.batch_norm:
                init.append(f"self.bn{i}b = nn.BatchNorm2d({ch})")
        for suffix in ("", "b") if spec.block_convs == 2 else ("",):
            inner = f"self.conv{i}{suffix}(x)"
            if spec.batch_norm:
                inner = f"self.bn{i}{suffix}({inner})"
            forward.append(f"x = F.relu({inner})")
        forward[-1] = f"x = self.pool({forward[-1][4:]})"
    size = f"{c} * {h} * {w}"
    init += [f"self.fc1 = nn.Linear({size}, {h1})", f"self.fc2 = nn.Linear({h1}, {h2})",
             "self.fc3 = nn.Linear(%d, 10)" % h2]
    lines = "\n        ".join(init)
    body = "\n        ".join(forward)
    return f'''\
class Net(nn.Module):
    # the tutorial's Net{" with batch norm after each conv" if spec.batch_norm else ""}\
{"; a third conv block" if spec.conv3 else ""}{"; two convs a block" if spec.block_convs == 2 else ""}
    # (CIFAR Lab's shape trace gives fc1's input: {c} channels of {h}×{w})
    def __init__(self):
        super(Net, self).__init__()
        {lines}

    def forward(self, x):
        {body}
        x = x.view(-1, {size})
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x
'''
