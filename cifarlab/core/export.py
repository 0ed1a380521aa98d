'''A runnable script that reproduces a run, in the tutorial's own plain PyTorch.

    text = export_script(TrainConfig(lr=0.01, epochs=4), source_note="run 3f2a… on the lab server")
    Path("cifar_run.py").write_text(text)     # python cifar_run.py [DATA]

The script needs only torch, torchvision and numpy (never cifarlab). It is the tutorial
"Training a Classifier" with the student's numbers filled in:

- ``transforms.Compose([ToTensor(), Normalize(...)])``, ``torchvision.datasets.CIFAR10(
  download=True)`` as the tutorial does; or, given a path as ``argv[1]`` or in
  ``$CIFARLAB_DATA`` (offline machines), an image folder or ``.tar.gz`` with ``train/<class>/``
  and ``test/<class>/`` (extracted to a temporary folder first), read with ``ImageFolder``;
- ``class Net`` exactly as the tutorial writes it for the default network; for another
  ``ModelSpec`` the same class with the student's channels, kernels, paddings, strides, pooling
  and hidden sizes, and fc1's input size written out from CIFAR Lab's shape trace, with a
  comment saying where it comes from;
- the tutorial's loop (zero_grad, forward, loss, backward, step, the running loss every
  ``log_every`` mini-batches) with their epochs, lr, momentum, batch size, num_workers and seed;
  the device line as in the seed (``cuda:0`` if available, else the CPU) or their device;
- ``torch.save(net.state_dict(), PATH)``, then the accuracy overall and per class.

Reproducing, not just resembling: ``torch.manual_seed(seed)`` right before building the network
gives the same initial weights as CIFAR Lab; the training subset is the same images
(``cifarlab.core.data.subset_indices``: NumPy's ``RandomState(0)`` permutation, first ``n``,
sorted; it does not depend on the training seed), and the epoch order is drawn the same way
(``RandomSampler`` with a generator seeded with the seed, one ``randperm`` per epoch). So on
the CPU, from the same images, the script prints the same running losses as the app's
``tutorial`` pipeline (the ``fast`` pipeline serves the same batches; its normalisation
differs from ``ToTensor``+``Normalize`` by at most ~1e-7 per pixel, so losses agree to about
the printed digits). On a GPU, cuDNN may differ in the last bits from run to run.
'''
from __future__ import annotations

import datetime as _dt

from cifarlab.core.config import TrainConfig
from cifarlab.core.shapes import trace_spec

TUTORIAL_URL = "https://pytorch.org/tutorials/beginner/blitz/cifar10_tutorial.html"

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

_HEADER = '''\
"""Train a CIFAR-10 classifier: PyTorch's tutorial "Training a Classifier", with these settings:
{describe}.

{tutorial_url}
Exported by CIFAR Lab on {date}; it needs only torch and torchvision. Run it with
``python {{script}}`` to download CIFAR-10 into ./data as the tutorial does, or, on a machine
without internet, ``python {{script}} DATA`` where DATA is an image folder or a .tar.gz holding
train/<class>/ and test/<class>/ (or set CIFARLAB_DATA to it).
"""
'''

_BODY = '''\
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

{notes}# This run's settings
EPOCHS = {epochs}
LEARNING_RATE = {lr}
MOMENTUM = {momentum}
BATCH_SIZE = {batch_size}
NUM_WORKERS = {num_workers}
SEED = {seed}
TRAIN_SUBSET = {train_subset}{subset_comment}
SHUFFLE = {shuffle}
LOG_EVERY = {log_every}  # print the running loss every LOG_EVERY mini-batches
PATH = './cifar_net.pth'

{device_line}

transform = transforms.Compose(
    [transforms.ToTensor(),
     transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])

classes = ('plane', 'car', 'bird', 'cat',
           'deer', 'dog', 'frog', 'horse', 'ship', 'truck')


{net}

def load_datasets(source):
    """The tutorial's download, or an offline copy: an image folder or a .tar.gz of one."""
    if not source or source.lower() == 'download':
        trainset = torchvision.datasets.CIFAR10(root='./data', train=True,
                                                download=True, transform=transform)
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
        return (torchvision.datasets.CIFAR10(root=root, train=True, transform=transform),
                torchvision.datasets.CIFAR10(root=root, train=False, transform=transform))
    if not os.path.isdir(os.path.join(root, 'train')):  # e.g. archive/cifar10/train/...
        subdirs = [e.path for e in os.scandir(root) if e.is_dir()]
        if len(subdirs) == 1:
            root = subdirs[0]
    # ImageFolder numbers the classes in alphabetical order: CIFAR-10's own order for its
    # names (airplane, automobile, bird, ...)
    trainset = torchvision.datasets.ImageFolder(os.path.join(root, 'train'), transform=transform)
    testset = torchvision.datasets.ImageFolder(os.path.join(root, 'test'), transform=transform)
    return trainset, testset


if __name__ == '__main__':  # needed for NUM_WORKERS > 0 on macOS and Windows
    source = sys.argv[1] if len(sys.argv) > 1 else os.environ.get('CIFARLAB_DATA')
    trainset, testset = load_datasets(source)
    if TRAIN_SUBSET is not None:
        # the same images CIFAR Lab trained on: a fixed random subset, sorted
        indices = np.sort(np.random.RandomState(0).permutation(len(trainset))[:TRAIN_SUBSET])
        trainset = torch.utils.data.Subset(trainset, indices.tolist())

    # shuffled like the tutorial's shuffle=True, with each epoch's order drawn from a
    # generator seeded with SEED (as CIFAR Lab does), so a run can be repeated exactly
    sampler = None
    if SHUFFLE:
        sampler = torch.utils.data.RandomSampler(
            trainset, generator=torch.Generator().manual_seed(SEED))
    trainloader = torch.utils.data.DataLoader(trainset, batch_size=BATCH_SIZE,
                                              sampler=sampler, num_workers=NUM_WORKERS)
    testloader = torch.utils.data.DataLoader(testset, batch_size=BATCH_SIZE,
                                             shuffle=False, num_workers=NUM_WORKERS)

    torch.manual_seed(SEED)  # the same initial weights as in CIFAR Lab
    net = Net()
    net.to(device)

    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)

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
            if i % LOG_EVERY == LOG_EVERY - 1:    # print every LOG_EVERY mini-batches
                print('[%d, %5d] loss: %.3f' %
                      (epoch + 1, i + 1, running_loss / LOG_EVERY), flush=True)
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
    correct_pred = {{classname: 0 for classname in classes}}
    total_pred = {{classname: 0 for classname in classes}}

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
        print(f'Accuracy for class: {{classname:5s}} is {{accuracy:.1f}} %')
'''


def export_script(config: TrainConfig, source_note: str | None = None,
                  script_name: str = "cifar_run.py") -> str:
    """The Python source of a script that reproduces ``config``'s run (see the module doc).

    ``source_note``: a line or two about where it came from (run id, date, accuracy), written
    as comments at the top. Raises ShapeError if the network does not fit a 32×32 image.
    """
    if not isinstance(config, TrainConfig):
        raise TypeError("export_script needs a TrainConfig")
    header = _HEADER.format(describe=_describe(config), tutorial_url=TUTORIAL_URL,
                            date=_dt.date.today().isoformat()).replace("{script}", script_name)
    notes = ""
    if source_note:
        printable = "".join(ch if ch.isprintable() or ch in "\n" else " "
                            for ch in str(source_note))
        lines = [" ".join(line.split()) for line in printable.splitlines()]
        notes = "".join(f"# {line}\n" for line in lines if line) + "\n"
    subset_comment = ("  # train on this many images (None: all of them)"
                      if config.train_subset is None else
                      "  # train on this many images, as in CIFAR Lab")
    body = _BODY.format(
        notes=notes, epochs=config.epochs, lr=repr(float(config.lr)),
        momentum=repr(float(config.momentum)), batch_size=config.batch_size,
        num_workers=config.num_workers, seed=config.seed, train_subset=config.train_subset,
        subset_comment=subset_comment, shuffle=config.shuffle, log_every=config.log_every,
        device_line=_device_line(config.device), net=_net_source(config))
    return header + body


def _describe(config: TrainConfig) -> str:
    text = config.describe()
    if not config.model.is_tutorial:
        m = config.model
        c, h = m.scaled_channels(), m.scaled_hidden()
        text += (f"; network: conv channels {c[0]}, {c[1]}, kernels {m.kernels[0]}, "
                 f"{m.kernels[1]}, paddings {m.paddings[0]}, {m.paddings[1]}, strides "
                 f"{m.strides[0]}, {m.strides[1]}, pooling {m.pool}, hidden {h[0]}, {h[1]}")
    # wrap at ~95 columns for the docstring
    words, lines, line = text.split(" "), [], ""
    for w in words:
        if line and len(line) + 1 + len(w) > 95:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}" if line else w
    lines.append(line)
    return "\n".join(lines)


def _device_line(device: str) -> str:
    if device == "auto":
        return 'device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")'
    if device == "cuda":
        device = "cuda:0"
    return f'device = torch.device("{device}")'


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
