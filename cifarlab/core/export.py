'''A runnable script that repeats a run, in the tutorial's own plain PyTorch (only torch,
torchvision and numpy: never cifarlab).

    text = export_script(config, source_note="run 3f2a… on the lab server")
    write_script("cifar_run.py", config)      # the same, its instructions naming that file
    export_checkpoint(checkpoint.load("cifar_net.pth"), "cifar_run.py")   # a checkpoint's run

The script is the tutorial "Training a Classifier" with the run's settings filled in: one
constant per config field (derived from the dataclass, its ``knobs()`` help as the comment, so a
field added to ``TrainConfig`` appears by itself); the tutorial's transform and data sets (the
download, or an image folder / ``.tar.gz`` given as ``argv[1]`` or ``$CIFARLAB_DATA``); ``class
Net`` as the tutorial writes it (or with the run's ``ModelSpec``, fc1's size from the shape
trace); both input pipelines (``PIPELINE``: the tutorial's DataLoader, or ``fast``: the images
decoded once into a uint8 tensor, ``FastLoader``'s arithmetic in plain torch, fused SGD as
``core.train`` uses with it); the tutorial's loop (a running loss every ``LOG_EVERY``
mini-batches, at least once per epoch), ``torch.save(net.state_dict(), PATH)`` and the accuracy.

Repeating, not resembling: ``torch.manual_seed(SEED)`` right before building the network gives
the same initial weights; the subset is the same images (``core.data.subset_indices``); each
epoch's order is ``SeededShuffle``'s, exactly one ``randperm`` per epoch (torch's
``RandomSampler`` draws a second one at each epoch's end, so from epoch 2 on it would differ).
So on the CPU the script prints the app's running losses, step for step, and its accuracy, for
either pipeline. On a GPU, cuDNN may differ in the last bits from run to run.
'''
from __future__ import annotations

import ast
import dataclasses
import datetime as _dt
import os
import pprint
import textwrap
from pathlib import Path

from cifarlab import i18n
from cifarlab.core.config import TrainConfig, knobs
from cifarlab.core.shapes import trace_spec
from cifarlab.errors import CifarLabError

TUTORIAL_URL = "https://pytorch.org/tutorials/beginner/blitz/cifar10_tutorial.html"
DEFAULT_NAME = "cifar_run.py"
# The tutorial's own names for its constants; every other field is written as NAME.upper()
CONSTANT_NAMES = {"lr": "LEARNING_RATE"}
# Fields the script's code reads; any other field is written down and marked as not used
_USED = {"epochs", "lr", "momentum", "batch_size", "num_workers", "device", "pipeline", "seed",
         "train_subset", "shuffle", "model", "log_every"}
_MODEL_NOTE = "The network's shape (written out as class Net below: edit Net to change it)."

_TUTORIAL_NET = '''\
class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.view(-1, 16 * 5 * 5)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x
'''

# <<name>> marks where export_script fills something in (the code keeps its own braces)
_SCRIPT = '''\
"""Train a CIFAR-10 classifier: PyTorch's tutorial "Training a Classifier", with these settings:
<<describe>>.

<<url>>
Exported by CIFAR Lab on <<date>>; it needs only torch and torchvision. Run it with
``python <<script>>`` to download CIFAR-10 into ./data as the tutorial does, or, on a machine
without internet, ``python <<script>> DATA`` where DATA is an image folder or a .tar.gz holding
train/<class>/ and test/<class>/ (or set CIFARLAB_DATA to it).
"""
import os
import sys
import tarfile
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torchvision
import torchvision.transforms as transforms

<<notes>># This run's settings: every setting of the CIFAR Lab run (change them to try another run)
<<settings>>
PATH = './cifar_net.pth'

if DEVICE == 'auto':  # the tutorial's choice: the first GPU if there is one, else the CPU
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
else:
    device = torch.device(DEVICE)

transform = transforms.Compose(
    [transforms.ToTensor(),
     transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])

classes = ('plane', 'car', 'bird', 'cat',
           'deer', 'dog', 'frog', 'horse', 'ship', 'truck')


<<net>>

def load_datasets(source, train_transform):
    """The tutorial's download, or an offline copy: an image folder or a .tar.gz of one."""
    if not source or source.lower() == 'download':
        trainset = torchvision.datasets.CIFAR10(root='./data', train=True,
                                                download=True, transform=train_transform)
        testset = torchvision.datasets.CIFAR10(root='./data', train=False,
                                               download=True, transform=transform)
        return trainset, testset
    root = source
    if os.path.isfile(source):  # an archive: extract it into a temporary folder first
        global _extracted
        _extracted = tempfile.TemporaryDirectory(prefix='cifar10-')
        print('Extracting', source, '...', flush=True)
        with tarfile.open(source) as tar:
            try:
                tar.extractall(_extracted.name, filter='data')
            except TypeError:  # Python < 3.11.4 has no extraction filters
                tar.extractall(_extracted.name)
        root = _extracted.name
    if os.path.isdir(os.path.join(root, 'cifar-10-batches-py')):  # torchvision's own files
        return (torchvision.datasets.CIFAR10(root=root, train=True, transform=train_transform),
                torchvision.datasets.CIFAR10(root=root, train=False, transform=transform))
    if not os.path.isdir(os.path.join(root, 'train')):  # e.g. archive/cifar10/train/...
        subdirs = [e.path for e in os.scandir(root) if e.is_dir()]
        if len(subdirs) == 1:
            root = subdirs[0]
    # ImageFolder numbers the classes in alphabetical order: CIFAR-10's own order for its
    # names (airplane, automobile, bird, ...)
    trainset = torchvision.datasets.ImageFolder(os.path.join(root, 'train'),
                                                transform=train_transform)
    testset = torchvision.datasets.ImageFolder(os.path.join(root, 'test'), transform=transform)
    return trainset, testset


class EpochShuffle(torch.utils.data.Sampler):
    """The tutorial's shuffle=True, repeatably: epoch k visits the images in the order of the
    k-th torch.randperm drawn from a generator seeded with SEED, as CIFAR Lab does."""

    def __init__(self, n, seed):
        self.n = n
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self):
        return self.n

    def __iter__(self):
        # one randperm per epoch, as CIFAR Lab (RandomSampler draws a 2nd at each epoch's end)
        return iter(torch.randperm(self.n, generator=self.generator).tolist())


class FastLoader:
    """CIFAR Lab's `fast` pipeline: every image decoded once into one uint8 tensor kept on the
    device; each epoch one randperm (the order EpochShuffle gives), each batch one gather and
    a normalisation of two operations instead of a DataLoader's per-image transforms."""

    def __init__(self, dataset, batch_size, shuffle, seed):
        # decode every image once into uint8 (PILToTensor), NUM_WORKERS processes helping
        decoded = list(torch.utils.data.DataLoader(dataset, batch_size=1000,
                                                   num_workers=NUM_WORKERS))
        self.images = torch.cat([x for x, _ in decoded]).to(device)
        self.labels = torch.cat([y for _, y in decoded]).to(device)
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self):
        return (len(self.labels) + self.batch_size - 1) // self.batch_size

    def __iter__(self):
        n = len(self.labels)
        order = torch.randperm(n, generator=self.generator) if self.shuffle else torch.arange(n)
        for batch in order.to(device).split(self.batch_size):
            # ToTensor + Normalize compute (x / 255 - 0.5) / 0.5; this is the same in two steps
            yield self.images[batch].float() * (2 / 255) - 1, self.labels[batch]


if __name__ == '__main__':  # needed for NUM_WORKERS > 0 on macOS and Windows
    source = sys.argv[1] if len(sys.argv) > 1 else os.environ.get('CIFARLAB_DATA')
    fast = PIPELINE == 'fast'
    # the fast pipeline decodes the training images to uint8 and normalises each batch itself
    trainset, testset = load_datasets(source, transforms.PILToTensor() if fast else transform)
    if TRAIN_SUBSET is not None:
        # the same images CIFAR Lab trained on: a fixed random subset, sorted
        indices = np.sort(np.random.RandomState(0).permutation(len(trainset))[:TRAIN_SUBSET])
        trainset = torch.utils.data.Subset(trainset, indices.tolist())

    if fast:
        trainloader = FastLoader(trainset, BATCH_SIZE, SHUFFLE, SEED)
    else:
        sampler = EpochShuffle(len(trainset), SEED) if SHUFFLE else None
        trainloader = torch.utils.data.DataLoader(trainset, batch_size=BATCH_SIZE,
                                                  sampler=sampler, num_workers=NUM_WORKERS)
    testloader = torch.utils.data.DataLoader(testset, batch_size=BATCH_SIZE,
                                             shuffle=False, num_workers=NUM_WORKERS)
    # an epoch shorter than LOG_EVERY mini-batches still prints its running loss at its end
    log_every = min(LOG_EVERY, len(trainloader))

    torch.manual_seed(SEED)  # the same initial weights as in CIFAR Lab
    net = Net()
    net.to(device)

    criterion = nn.CrossEntropyLoss()
    # with the fast pipeline CIFAR Lab uses PyTorch's fused SGD: the same update, one kernel
    fused = True if fast and device.type in ('cpu', 'cuda') else None  # None: the default
    optimizer = optim.SGD(net.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM, fused=fused)

    for epoch in range(EPOCHS):  # loop over the dataset multiple times

        running_loss = 0.0
        for i, data in enumerate(trainloader, 0):
            # get the inputs; data is a list of [inputs, labels]
            inputs, labels = data[0].to(device), data[1].to(device)

            # zero the parameter gradients
            optimizer.zero_grad()

            # forward + backward + optimize
            outputs = net(inputs)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()

            # print statistics
            running_loss += loss.item()
            if i % log_every == log_every - 1:    # print every log_every mini-batches
                print('[%d, %5d] loss: %.3f' %
                      (epoch + 1, i + 1, running_loss / log_every), flush=True)
                running_loss = 0.0

    print('Finished Training')

    torch.save(net.state_dict(), PATH)

    net = Net()
    net.load_state_dict(torch.load(PATH, weights_only=True))

    correct = 0
    total = 0
    # since we're not training, we don't need to calculate the gradients for our outputs
    with torch.no_grad():
        for data in testloader:
            images, labels = data
            # calculate outputs by running images through the network
            outputs = net(images)
            # the class with the highest energy is what we choose as prediction
            _, predicted = torch.max(outputs, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum().item()

    print('Accuracy of the network on the %d test images: %d %%' % (total, 100 * correct / total))

    # prepare to count predictions for each class
    correct_pred = {classname: 0 for classname in classes}
    total_pred = {classname: 0 for classname in classes}

    # again no gradients needed
    with torch.no_grad():
        for data in testloader:
            images, labels = data
            outputs = net(images)
            _, predictions = torch.max(outputs, 1)
            # collect the correct predictions for each class
            for label, prediction in zip(labels, predictions):
                if label == prediction:
                    correct_pred[classes[label]] += 1
                total_pred[classes[label]] += 1

    # print accuracy for each class
    for classname, correct_count in correct_pred.items():
        accuracy = 100 * float(correct_count) / max(1, total_pred[classname])
        print(f'Accuracy for class: {classname:5s} is {accuracy:.1f} %')
'''


def export_script(config: TrainConfig, source_note: str | None = None,
                  script_name: str = DEFAULT_NAME) -> str:
    """The Python source of a script that repeats ``config``'s run (see the module doc).

    ``source_note``: a line or two about where it came from (run id, date, accuracy), written
    as comments at the top. ``script_name``: the file name the script will be saved as (its
    instructions say ``python <script_name>``). Raises ShapeError if the network does not fit
    a 32×32 image.
    """
    if not isinstance(config, TrainConfig):
        raise TypeError("export_script needs a TrainConfig")
    net = _net_source(config)  # first: a ShapeError before anything else
    parts = {"describe": _describe(config), "url": TUTORIAL_URL,
             "date": _dt.date.today().isoformat(), "script": _one_line(script_name),
             "notes": _notes(source_note), "settings": settings_block(config), "net": net}
    text = _SCRIPT
    for key, value in parts.items():
        text = text.replace(f"<<{key}>>", value)
    return text


def constant_name(field_name: str) -> str:
    """The script's constant for a config field: the tutorial's name, else NAME.upper()."""
    return CONSTANT_NAMES.get(field_name, field_name.upper())


def settings_block(config: TrainConfig) -> str:
    """One constant per field of the config (in the dataclass's order), each under a comment:
    its knob's help (English), so a field added to TrainConfig appears here by itself."""
    helps = {f.name: i18n.t(f.knob.help, "en") + (
        " One of: " + ", ".join(map(repr, f.knob.choices)) + "." if f.knob.choices else "")
        for f in knobs(type(config))}
    helps.setdefault("model", _MODEL_NOTE)
    lines: list[str] = []
    for f in dataclasses.fields(config):
        name = constant_name(f.name)
        comment = helps.get(f.name, "")
        if f.name not in _USED:
            comment = (comment + " " if comment else "") + (
                "(A CIFAR Lab setting that this script does not use.)")
        lines += [f"# {line}" for line in textwrap.wrap(comment, 93)]
        lines.append(f"{name} = {_literal(getattr(config, f.name), len(name) + 3)}")
    return "\n".join(lines)


def _literal(value, indent: int) -> str:
    """``value`` as Python source (a ModelSpec as its dict), wrapped to fit 95 columns."""
    value = value.to_dict() if hasattr(value, "to_dict") else value
    text = pprint.pformat(value, width=95 - indent, sort_dicts=False)
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError):  # something without a literal: write its text
        return repr(str(value))
    return text.replace("\n", "\n" + " " * indent)


def write_script(path: str | os.PathLike, config: TrainConfig,
                 source_note: str | None = None) -> Path:
    """Write ``export_script(config, ...)`` to ``path`` (its instructions name that file).

    CifarLabError (``export.no_folder``, ``export.is_folder``, ``export.cannot_write``) when
    the folder is missing, the path is a folder, or the file cannot be written.
    """
    path = Path(path).expanduser()
    if path.is_dir():
        raise CifarLabError("export.is_folder", field="output", path=str(path),
                            name=DEFAULT_NAME)
    if not path.parent.is_dir():
        raise CifarLabError("export.no_folder", field="output", path=str(path),
                            folder=str(path.parent))
    text = export_script(config, source_note=source_note, script_name=path.name)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as err:
        raise CifarLabError("export.cannot_write", field="output", path=str(path),
                            reason=err.strerror or type(err).__name__) from None
    return path


def checkpoint_note(checkpoint, name: str | None = None) -> str:
    """The comment line naming where a checkpoint's run came from, with its test accuracy."""
    note = "CIFAR Lab checkpoint" + (f" {Path(name).name}" if name else "")
    acc = (checkpoint.results or {}).get("test_accuracy")
    if isinstance(acc, (int, float)) and not isinstance(acc, bool):
        note += f", test accuracy {100 * acc:.1f} %"
    return note


def export_checkpoint(checkpoint, path: str | os.PathLike, name: str | None = None) -> Path:
    """Write the script that repeats a loaded checkpoint's run (``core.checkpoint.load``).

    A plain state_dict (the tutorial's own ``cifar_net.pth``) holds no run settings:
    CifarLabError ``export.weights_only``.
    """
    if getattr(checkpoint, "plain", False):
        raise CifarLabError("export.weights_only", field="checkpoint",
                            name=Path(name).name if name else "")
    return write_script(path, checkpoint.config, checkpoint_note(checkpoint, name))


def _one_line(text: str) -> str:
    return " ".join("".join(ch if ch.isprintable() else " " for ch in str(text)).split())


def _notes(source_note: str | None) -> str:
    lines = [_one_line(line) for line in str(source_note or "").splitlines()]
    return "".join(f"# {line}\n" for line in lines if line) + ("\n" if source_note else "")


def _describe(config: TrainConfig) -> str:
    net = "the tutorial's network" if config.model.is_tutorial else "the network of MODEL"
    return "\n".join(textwrap.wrap(f"{config.describe()}, {net}", 95))


def _net_source(config: TrainConfig) -> str:
    spec = config.model
    if spec.is_tutorial:
        return _TUTORIAL_NET
    traces = trace_spec(spec)  # ShapeError if some layer does not fit
    flat = next(t for t in traces if t.kind == "flatten")
    c, h, w = flat.in_shape
    n = flat.out_shape[0]
    c1, c2 = spec.scaled_channels()
    h1, h2 = spec.scaled_hidden()
    p = spec.pool

    def conv(cin: int, cout: int, i: int) -> str:
        args = [str(cin), str(cout), str(spec.kernels[i])]
        if spec.strides[i] != 1:
            args.append(f"stride={spec.strides[i]}")
        if spec.paddings[i] != 0:
            args.append(f"padding={spec.paddings[i]}")
        return f"nn.Conv2d({', '.join(args)})"

    size = f"{c} * {h} * {w}"
    return f'''\
class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = {conv(3, c1, 0)}
        self.pool = nn.MaxPool2d({p}, {p})
        self.conv2 = {conv(c1, c2, 1)}
        # fc1's input: conv2's {c} channels of {h}×{w} after pooling = {n:,} numbers
        # (CIFAR Lab's shape trace; the tutorial's network has 16 * 5 * 5 = 400 here)
        self.fc1 = nn.Linear({size}, {h1})
        self.fc2 = nn.Linear({h1}, {h2})
        self.fc3 = nn.Linear({h2}, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.view(-1, {size})
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x
'''
