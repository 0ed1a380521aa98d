'''The code that repeats a run, in pieces: the one source of truth for both the exported script
(``script.py`` joins them, the run's part under ``if __name__ == '__main__':``) and the notebook
(``notebook.py`` puts each piece in a cell, with an explanation between them).

Each piece is the tutorial's code at the top level (no indentation). ``<<name>>`` marks where the
exporter fills something in; a line holding only ``#<<name>>`` is a hook: the notebook puts a line
of its own there (recording every step's loss), the script drops it.
'''
from __future__ import annotations

from cifarlab.core.config import TrainConfig
from cifarlab.core.export.graph_piece import GRAPHS  # CUDA_GRAPHS' class GraphedStep
from cifarlab.core.shapes import trace_spec

TUTORIAL_URL = "https://pytorch.org/tutorials/beginner/blitz/cifar10_tutorial.html"

IMPORTS = '''\
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
'''

SETTINGS = '''\
<<notes>># This run's settings: every setting of the CIFAR Lab run (change them to try another run)
<<settings>>
PATH = './cifar_net.pth'
'''

DEVICE = '''\
if DEVICE == 'auto':  # the tutorial's choice: the first GPU if there is one, else the CPU
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
else:
    device = torch.device(DEVICE)
#<<threads>>
'''

TRANSFORM = '''\
transform = transforms.Compose(
    [transforms.ToTensor(),
     transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])

classes = ('plane', 'car', 'bird', 'cat',
           'deer', 'dog', 'frog', 'horse', 'ship', 'truck')
'''

TUTORIAL_NET = '''\
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

DATASETS = '''\
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
'''

SHUFFLE = '''\
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
'''

FAST_LOADER = '''\
<<augment_class>>class FastLoader:
    """CIFAR Lab's `fast` pipeline: every image decoded once into one uint8 tensor kept on the
    device; each epoch one randperm (the order EpochShuffle gives), each batch one gather and
    a normalisation of two operations instead of a DataLoader's per-image transforms."""

    def __init__(self, dataset, batch_size, shuffle, seed):
        # decode every image once into uint8 (PILToTensor), NUM_WORKERS processes helping
        decoded = list(torch.utils.data.DataLoader(dataset, batch_size=1000,
                                                   num_workers=NUM_WORKERS))
        self.images = torch.cat([x for x, _ in decoded]).to(device)
        self.labels = torch.cat([y for _, y in decoded]).to(device)
        <<augment_init>>self.batch_size = batch_size
        self.shuffle = shuffle
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self):
        return (len(self.labels) + self.batch_size - 1) // self.batch_size

    def __iter__(self):
        n = len(self.labels)
        order = torch.randperm(n, generator=self.generator) if self.shuffle else torch.arange(n)
        for batch in order.to(device).split(self.batch_size):
            # ToTensor + Normalize compute (x / 255 - 0.5) / 0.5; this is the same in two steps
            yield <<augment_call>>self.images[batch].float() * (2 / 255) - 1<<augment_end>>, self.labels[batch]
'''

# -- the run itself (the script's `if __name__ == '__main__':` block) ------------------------
SCRIPT_SOURCE = '''\
source = sys.argv[1] if len(sys.argv) > 1 else os.environ.get('CIFARLAB_DATA')
'''

DATA = '''\
fast = PIPELINE == 'fast'
# the fast pipeline decodes the training images to uint8 and normalises each batch itself
trainset, testset = load_datasets(source, transforms.PILToTensor() if fast else transform)
if TRAIN_SUBSET is not None:
    # the same images CIFAR Lab trained on: a fixed random subset, sorted
    indices = np.sort(np.random.RandomState(0).permutation(len(trainset))[:TRAIN_SUBSET])
    trainset = torch.utils.data.Subset(trainset, indices.tolist())
'''

LOADERS = '''\
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
'''

MODEL = '''\
torch.manual_seed(SEED)  # the same initial weights as in CIFAR Lab
net = Net()
net.to(device)

criterion = nn.CrossEntropyLoss(<<criterion_args>>)
# with the fast pipeline CIFAR Lab uses PyTorch's fused SGD: the same update, one kernel
fused = True if fast and device.type in ('cpu', 'cuda') else None  # None: the default
optimizer = optim.SGD(net.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM,<<sgd_args>> fused=fused)
<<scheduler>><<graphed>>'''

TRAIN = '''\
#<<before_loop>>
for epoch in range(EPOCHS):  # loop over the dataset multiple times

    running_loss = 0.0
    for i, data in enumerate(trainloader, 0):
        # get the inputs; data is a list of [inputs, labels]
        inputs, labels = data[0].to(device), data[1].to(device)

        # with CUDA_GRAPHS, one replay of the captured step (None: this batch runs as below)
        loss = graphed(inputs, labels) if graphed else None
        if loss is None:
            # zero the parameter gradients
            optimizer.zero_grad()

            # forward + backward + optimize
            outputs = net(inputs)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
<<scheduler_step>>
        # print statistics
        running_loss += loss.item()
        #<<each_step>>
        if i % log_every == log_every - 1:    # print every log_every mini-batches
            print('[%d, %5d] loss: %.3f' %
                  (epoch + 1, i + 1, running_loss / log_every), flush=True)
            running_loss = 0.0

print('Finished Training')
'''

SAVE = '''\
torch.save(net.state_dict(), PATH)

net = Net()
net.load_state_dict(torch.load(PATH, weights_only=True))
<<eval_mode>>'''

ACCURACY = '''\
correct = 0
total = 0
# since we're not training, we don't need to calculate the gradients for our outputs
with torch.no_grad():
    for data in testloader:
        images, labels = data
        # calculate outputs by running images through the network
        outputs = <<predict>>
        # the class with the highest energy is what we choose as prediction
        _, predicted = torch.max(outputs, 1)
        total += labels.size(0)
        correct += (predicted == labels).sum().item()

print('Accuracy of the network on the %d test images: %d %%' % (total, 100 * correct / total))
'''

PER_CLASS = '''\
# prepare to count predictions for each class
correct_pred = {classname: 0 for classname in classes}
total_pred = {classname: 0 for classname in classes}

# again no gradients needed
with torch.no_grad():
    for data in testloader:
        images, labels = data
        outputs = <<predict>>
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

# The pieces in order, as (name, code): the definitions, then the run. The names key the
# notebook's explanations (``bundle.nb.<name>`` in the catalogs).
DEFINITIONS = (("imports", IMPORTS), ("settings", SETTINGS), ("device", DEVICE),
               ("transform", TRANSFORM), ("net", "<<net>>"), ("datasets", DATASETS),
               ("shuffle", SHUFFLE), ("fast_loader", FAST_LOADER), ("graphs", GRAPHS))
RUN = (("data", DATA), ("loaders", LOADERS), ("model", MODEL), ("train", TRAIN),
       ("save", SAVE), ("accuracy", ACCURACY), ("per_class", PER_CLASS))


def fill(code: str, parts: dict[str, str], hooks: dict[str, str] | None = None) -> str:
    """``code`` with its ``<<name>>`` marks filled in from ``parts`` and its ``#<<hook>>``
    lines replaced by ``hooks[hook]`` (indented as the hook) or dropped."""
    lines = []
    for line in code.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("#<<") and stripped.endswith(">>"):
            extra = (hooks or {}).get(stripped[3:-2])
            if extra:
                pad = line[:len(line) - len(line.lstrip())]
                lines += [pad + x + "\n" for x in extra.splitlines()]
            continue
        lines.append(line)
    text = "".join(lines)
    for key, value in parts.items():
        text = text.replace(f"<<{key}>>", value)
    return text


def conv_code(spec, cin: int, cout: int, i: int) -> str:
    """``nn.Conv2d(...)`` for conv ``i`` of a ModelSpec, naming only what differs from the
    defaults (as the tutorial writes ``nn.Conv2d(3, 6, 5)``)."""
    args = [str(cin), str(cout), str(spec.kernels[i])]
    if spec.strides[i] != 1:
        args.append(f"stride={spec.strides[i]}")
    if spec.paddings[i] != 0:
        args.append(f"padding={spec.paddings[i]}")
    return f"nn.Conv2d({', '.join(args)})"


def net_source(config: TrainConfig) -> str:
    """``class Net`` as the tutorial writes it, or with the run's ModelSpec (fc1's input size
    from the shape trace). ShapeError if the network does not fit a 32×32 image."""
    spec = config.model
    if spec.is_tutorial:
        return TUTORIAL_NET
    if not spec.is_plain:  # batch norm, a third block, two convs a block: issue 13
        from cifarlab.core.export.tricks_code import net_source as blocks_net

        return blocks_net(spec)
    traces = trace_spec(spec)  # ShapeError if some layer does not fit
    flat = next(t for t in traces if t.kind == "flatten")
    c, h, w = flat.in_shape
    n = flat.out_shape[0]
    c1, c2 = spec.scaled_channels()
    h1, h2 = spec.scaled_hidden()
    p = spec.pool

    def conv(cin: int, cout: int, i: int) -> str:
        return conv_code(spec, cin, cout, i)

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
