"""The Inside the network page's engine: one image through a network, layer by layer.

``activations`` holds the forward pass, the neuron and the filters; ``explain`` the Captum
views (Captum is imported there only, lazily). The pictures a student uploads go through the
Results page's checks (``cifarlab.lab.results.prepare_image``).
"""
from __future__ import annotations

import numpy as np

from cifarlab.lab.inside.activations import (
    CONV_LAYERS, activation_name, activation_of, activations, filter_patches, filter_table,
    initial_model, neuron, num_classes, random_model, stage, to_input)
from cifarlab.lab.inside.explain import (METHODS, blocks, explain, explain_all, occlusion_windows,
                                         strongest)

__all__ = [
    "CONV_LAYERS", "activation_name", "activation_of", "activations", "filter_patches",
    "filter_table", "initial_model", "neuron", "num_classes", "random_model", "stage", "to_input",
    "METHODS", "blocks", "explain", "explain_all", "occlusion_windows", "strongest",
    "misclassified", "class_members",
]


def misclassified(probabilities: np.ndarray, labels: np.ndarray, limit: int = 200) -> np.ndarray:
    """Test images the model got wrong, the most confidently wrong first (``probabilities``:
    N×classes, as ``EvalResult.probabilities``)."""
    probs = np.asarray(probabilities)
    labels = np.asarray(labels, dtype=np.int64)
    pred = probs.argmax(axis=1)
    idx = np.flatnonzero(pred != labels)
    order = np.argsort(-probs[idx, pred[idx]], kind="stable")
    return idx[order][:max(0, int(limit))]


def class_members(labels: np.ndarray, cls: int) -> np.ndarray:
    """Indices of the test images of class ``cls``, in the data set's order."""
    return np.flatnonzero(np.asarray(labels, dtype=np.int64) == int(cls))
