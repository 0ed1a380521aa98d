"""The validation split (``TrainConfig.val_fraction``): training images held out, to measure
each epoch how the network does on images it never learned from (overfitting)."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from cifarlab.core.config import TrainConfig, val_count
from cifarlab.core.data.pipelines import normalize, subset_indices


def split(config: TrainConfig, n_train: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``(train, validation)`` indices into the training images, each sorted, disjoint, and fixed
    by (n_train, train_subset, val_fraction, seed); ``(None, None)`` with no validation (the
    loaders then take ``train_subset`` as they always did)."""
    pool = (subset_indices(n_train, config.train_subset) if config.train_subset
            else np.arange(n_train, dtype=np.int64))
    k = val_count(len(pool), config.val_fraction)
    if not k:
        return None, None
    # its own generator: the split never moves the torch stream the model's weights come from
    order = np.random.default_rng(config.seed).permutation(len(pool))
    return np.sort(pool[order[k:]]), np.sort(pool[order[:k]])


@torch.no_grad()
def measure(model: nn.Module, criterion, data, indices: np.ndarray, device: torch.device,
            batch_size: int = 1000) -> dict[str, float]:
    """The mean loss (``criterion``, the training loss) and accuracy on the training images at
    ``indices``, in batches, the model in eval mode; it goes back to training mode after."""
    model.eval()
    total_loss, correct = 0.0, 0
    for start in range(0, len(indices), batch_size):
        idx = indices[start:start + batch_size]
        x = normalize(torch.from_numpy(np.array(data.train_x[idx])).to(device))
        y = torch.as_tensor(np.asarray(data.train_y)[idx], dtype=torch.int64, device=device)
        logits = model(x).float()
        total_loss += float(criterion(logits, y)) * len(idx)
        correct += int((logits.argmax(1) == y).sum())
    model.train()
    n = max(1, len(indices))
    return {"val_loss": total_loss / n, "val_accuracy": correct / n}
