"""Take a run home: the script that repeats it, the same code as a notebook in the student's
language, its TensorBoard logs, a model card, and all of them with the weights in one zip. No
submodule imports from this package, only from its siblings.

Repeating, not resembling: ``torch.manual_seed(SEED)`` right before building the network gives
the same initial weights, the subset is the same images, and each epoch's order is
``SeededShuffle``'s, exactly one ``randperm`` per epoch (torch's ``RandomSampler`` draws a
second one at each epoch's end). So on the CPU the script and the notebook print the app's
running losses step for step, for either pipeline; on a GPU, cuDNN may differ in the last bits.
"""
from cifarlab.core.export.record import RunRecord
from cifarlab.core.export.render import (CONSTANT_NAMES, DEFAULT_NAME, TUTORIAL_URL,
                                         checkpoint_note, constant_name, export_script,
                                         settings_block)

# The notebook, logs and bundle load nbformat and tensorboard: only when one is asked for.
_LAZY = {"build_notebook": "notebook", "notebook_json": "notebook", "model_card": "card",
         "log_files": "tensorboard", "bundle_bytes": "bundle", "bundle_files": "bundle",
         "write_export": "bundle", "FORMATS": "bundle"}

__all__ = ["TUTORIAL_URL", "CONSTANT_NAMES", "DEFAULT_NAME", "RunRecord", "checkpoint_note",
           "constant_name", "export_script", "settings_block"]
__all__ += list(_LAZY)  # the names loaded on first use (__getattr__)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"cifarlab.core.export.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
