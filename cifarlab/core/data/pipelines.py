"""The two input pipelines, ``tutorial`` (a DataLoader) and ``fast``, each epoch one randperm."""
from __future__ import annotations

import math
import os
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch
import torchvision
import torchvision.transforms as transforms
from PIL import Image

from cifarlab.core.data.cache import CifarData
from cifarlab.core.data.loading import load
from cifarlab.core.data.sources import WORKER_START
from cifarlab.core.tricks import BatchAugment
from cifarlab.errors import DataError


def tutorial_transform() -> transforms.Compose:
    """The tutorial's transform."""
    return transforms.Compose(
        [transforms.ToTensor(),
         transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])


def normalize(x: torch.Tensor) -> torch.Tensor:
    """uint8 images (…×3×H×W) -> float32, exactly ``Normalize((.5,)*3, (.5,)*3)(ToTensor(x))``:
    ``x / 255``, then ``(x - 0.5) / 0.5`` (the same float32 operations, so the same bits)."""
    return x.to(torch.float32).div(255).sub_(0.5).div_(0.5)


def _as_data(data: CifarData | str | os.PathLike | None) -> CifarData:
    return data if isinstance(data, CifarData) else load(data)


def subset_indices(n: int, size: int, seed: int = 0) -> np.ndarray:
    """A fixed random subset of ``size`` of ``range(n)``, sorted: NumPy's legacy
    ``RandomState``, whose stream never changes, so every training seed sees the same images."""
    if size > n:
        raise DataError("data.subset_too_large", field="train_subset", size=int(size), n=n)
    if size == n:
        return np.arange(n, dtype=np.int64)
    perm = np.random.RandomState(seed).permutation(n)
    return np.sort(perm[:size]).astype(np.int64)


def _subset(n: int, subset: int | Sequence[int] | np.ndarray | None) -> np.ndarray | None:
    """None (everything), a size (-> subset_indices) or explicit indices."""
    if subset is None:
        return None
    if isinstance(subset, (int, np.integer)) and not isinstance(subset, bool):
        return subset_indices(n, int(subset))
    idx = np.asarray(subset, dtype=np.int64).reshape(-1)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise DataError("data.subset_indices", field="train_subset", last=n - 1)
    return idx


class CifarImages(torchvision.datasets.VisionDataset):
    """The decoded images as a torchvision data set like ``CIFAR10``; pickled, it sends its path."""

    def __init__(self, data: CifarData, split: str, transform: Callable):
        self.data, self.labels = data.split(split)
        super().__init__(root=data.source, transform=transform)
        self.split = split
        self._source = data
        self.classes = list(data.classes)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        img = Image.fromarray(np.ascontiguousarray(self.data[index].transpose(1, 2, 0)))
        return self.transform(img), int(self.labels[index])

    def __len__(self) -> int:
        return len(self.labels)

    def __getstate__(self) -> dict:
        return dict(self.__dict__, data=None, labels=None)

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.data, self.labels = self._source.split(self.split)


def tutorial_dataset(data: CifarData | str | None, split: str = "train") -> CifarImages:
    """The split as the tutorial's data set: items are ``(ToTensor+Normalize(image), label)``."""
    return CifarImages(_as_data(data), split, transform=tutorial_transform())


def tutorial_loader(data: CifarData | str | None, split: str = "train", batch_size: int = 4,
                    num_workers: int = 2, shuffle: bool = True, seed: int = 0,
                    subset: int | Sequence[int] | None = None, pin_memory: bool = False,
                    persistent_workers: bool = True) -> torch.utils.data.DataLoader:
    """The tutorial's ``DataLoader``, each epoch's order from ``SeededShuffle``."""
    ds: torch.utils.data.Dataset = tutorial_dataset(data, split)
    idx = _subset(len(ds), subset)
    if idx is not None:
        ds = torch.utils.data.Subset(ds, idx.tolist())
    sampler = SeededShuffle(len(ds), seed) if shuffle else None
    return torch.utils.data.DataLoader(
        ds, batch_size=batch_size, shuffle=False, sampler=sampler, num_workers=num_workers,
        pin_memory=bool(pin_memory) and torch.cuda.is_available(),
        persistent_workers=bool(persistent_workers and num_workers > 0),
        generator=_generator(seed + 1),  # worker seeds only: the order comes from the sampler
        multiprocessing_context=WORKER_START if num_workers > 0 else None)


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed) % (2 ** 63))


class SeededShuffle(torch.utils.data.Sampler):
    """``shuffle=True``, reproducibly: one ``torch.randperm(n)`` per epoch from a generator
    seeded once, as ``FastLoader`` does (``RandomSampler`` draws a second at each epoch's end)."""

    def __init__(self, n: int, seed: int = 0):
        self.n = int(n)
        self.generator = _generator(seed)

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[int]:
        return iter(torch.randperm(self.n, generator=self.generator).tolist())


class FastLoader:
    """The fast pipeline: the uint8 images as one tensor on ``device``, one ``randperm`` an
    epoch, per batch one ``index_select`` and a two-op normalisation (within 1e-6 of the
    tutorial's transform). ``last_epoch_indices``: what the latest epoch served, in order."""

    def __init__(self, data: CifarData | str | None, split: str = "train",
                 batch_size: int = 4, device: str | torch.device = "cpu",
                 shuffle: bool = True, seed: int = 0,
                 subset: int | Sequence[int] | None = None, augment: str = "none"):
        data = _as_data(data)
        x, y = data.split(split)
        idx = _subset(len(y), subset)
        self.indices = idx if idx is not None else np.arange(len(y), dtype=np.int64)
        self.device = torch.device(device)
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.n = len(self.indices)
        self.last_epoch_indices: np.ndarray | None = None
        self._generator = _generator(seed)
        # fancy indexing copies: a private, writable tensor
        self.x = torch.from_numpy(np.asarray(x[self.indices], dtype=np.uint8)).to(self.device)
        self.y = torch.from_numpy(np.asarray(y[self.indices], dtype=np.int64)).to(self.device)
        # flips/shifts of each normalised batch, on the device (core.tricks)
        self.augment = BatchAugment(augment, seed, self.device) if augment != "none" else None

    def __len__(self) -> int:
        return math.ceil(self.n / self.batch_size)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        perm = (torch.randperm(self.n, generator=self._generator) if self.shuffle
                else torch.arange(self.n))
        self.last_epoch_indices = self.indices[perm.numpy()]
        return self._batches(perm.to(self.device))

    def _batches(self, perm: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for idx in perm.split(self.batch_size):
            xb, yb = torch.index_select(self.x, 0, idx), torch.index_select(self.y, 0, idx)
            xb = xb.float().mul_(2.0 / 255.0).sub_(1.0)
            yield (self.augment(xb) if self.augment else xb), yb
