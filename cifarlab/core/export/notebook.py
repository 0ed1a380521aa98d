"""The run as a Jupyter notebook: the tutorial's code with the run's settings, one piece a cell
(``pieces``, the same code as the exported script), each under an explanation in the student's
language (``bundle.nb.*`` in the catalogs). It opens in Colab (where torchvision downloads
CIFAR-10) and offline (an image folder or ``.tar.gz`` named by ``CIFARLAB_DATA``), records every
step's loss, and ends by comparing itself with CIFAR Lab's run: the accuracy, each epoch's mean
loss and, beside the zip's ``cifar_net.pth``, the weights; it writes what it measured to
``notebook_run.json``.

    text = notebook_json(record, lang="es")     # nbformat 4 JSON
"""
from __future__ import annotations

import math

import nbformat
from nbformat import v4

from cifarlab import i18n
from cifarlab.core.config import CIFAR10_CLASSES, TUTORIAL_SHORT_NAMES, knobs
from cifarlab.core.export import pieces
from cifarlab.core.export.record import RunRecord
from cifarlab.core.export.script import code_parts, constant_name

RESULTS_FILE = "notebook_run.json"
HOOKS = {"before_loop": "step_losses = []  # every step's loss, to compare with CIFAR Lab's",
         "each_step": "step_losses.append(loss.item())"}
# On the CPU the order of PyTorch's sums depends on its number of threads (from the ~20th step
# of a run on, 1 and 2 threads differ in the last bit, and then more): the run's own count
# repeats it to the bit.
THREADS = '''\
# CIFAR Lab trained this run with {n} CPU thread(s): the same number adds up in the same order
torch.set_num_threads({n})'''

SOURCE = '''\
# Where CIFAR-10 comes from: offline, an image folder or a .tar.gz of one named by CIFARLAB_DATA;
# otherwise (Colab, or any machine with internet) torchvision downloads it into ./data
DATA = os.environ.get('CIFARLAB_DATA', '')
source = DATA if DATA and os.path.exists(DATA) else 'download'
print('CIFAR-10:', source)
'''

LAB_WEIGHTS = '''\
# the weights CIFAR Lab trained (cifar_net.pth in the zip), read before this notebook saves its
# own under the same name
lab_state = torch.load(PATH, weights_only=True) if os.path.exists(PATH) else None
'''

COMPARE = '''\
import json

# CIFAR Lab's run (None where it did not record the figure)
LAB_ACCURACY = <<accuracy>>
LAB_EPOCH_LOSSES = <<epoch_losses>>

accuracy = correct / total
steps = len(trainloader)
epoch_losses = [sum(step_losses[k:k + steps]) / steps
                for k in range(0, len(step_losses), steps)]
print(<<t_accuracy>>)
print('  CIFAR Lab:', 'n/a' if LAB_ACCURACY is None else '%.2f %%' % (100 * LAB_ACCURACY))
print('  notebook: ', '%.2f %%' % (100 * accuracy))
print(<<t_losses>>)
for epoch, loss in enumerate(epoch_losses):
    lab = LAB_EPOCH_LOSSES[epoch] if epoch < len(LAB_EPOCH_LOSSES) else None
    print('  %d: CIFAR Lab %s, notebook %.6f' % (epoch + 1, 'n/a' if lab is None else
                                                  '%.6f' % lab, loss))
if lab_state is not None:
    ours = net.state_dict()
    print(<<t_weights>>, max((ours[k] - v).abs().max().item() for k, v in lab_state.items()))

with open(<<results_file>>, 'w') as f:
    json.dump({'losses': step_losses, 'epoch_losses': epoch_losses, 'accuracy': accuracy,
               'correct': correct, 'total': total,
               'per_class': {c: correct_pred[c] / max(1, total_pred[c]) for c in classes}}, f)
'''


def build_notebook(record: RunRecord, lang: str = i18n.DEFAULT) -> nbformat.NotebookNode:
    """The notebook (nbformat 4) that repeats ``record``'s run, explained in ``lang``."""
    lang = i18n.normalize_lang(lang)
    config = record.config
    parts = code_parts(config, source_note(record))
    values = _values(record, lang)
    threads = run_threads(record)
    hooks = dict(HOOKS, threads=THREADS.format(n=threads) if threads else "")

    def text(name: str) -> str:
        return i18n.t(f"bundle.nb.{name}", lang, **values)

    cells = [v4.new_markdown_cell(text("title") + "\n\n" + text("intro"))]

    def add(name: str, code: str, explain: str | None = None) -> None:
        cells.append(v4.new_markdown_cell(explain or text(name)))
        cells.append(v4.new_code_cell(pieces.fill(code, parts, hooks).rstrip("\n")))

    extra = {"settings": "\n\n" + _settings_table(record, lang),
             "device": "\n\n" + (text("threads") if threads else text("threads_unknown"))}
    for name, code in pieces.DEFINITIONS:
        add(name, code, text(name) + extra.get(name, ""))
    add("source", SOURCE)
    for name, code in pieces.RUN:
        if name == "save":
            add("lab_weights", LAB_WEIGHTS)
        add(name, code)
    add("compare", _compare(record, lang))
    for i, cell in enumerate(cells):   # stable ids: the same run gives the same file
        cell["id"] = f"c{i:02d}"
    meta = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"}, "colab": {"provenance": []}}
    nb = v4.new_notebook(cells=cells, metadata=meta)
    nbformat.validate(nb)
    return nb


def notebook_json(record: RunRecord, lang: str = i18n.DEFAULT) -> str:
    """``build_notebook(record, lang)`` as the text of an ``.ipynb`` file."""
    return nbformat.writes(build_notebook(record, lang))


def run_threads(record: RunRecord) -> int | None:
    """The CPU threads the run trained with (its environment's ``torch_threads``), when it
    ran on the CPU and that was recorded."""
    env = record.env or {}
    n = env.get("torch_threads")
    device = str(record.results.get("device") or env.get("device") or "cpu")
    return int(n) if isinstance(n, int) and n > 0 and device.startswith("cpu") else None


def source_note(record: RunRecord) -> str:
    note = "CIFAR Lab " + (f"run {record.run_id}" if record.run_id else "checkpoint")
    if record.name:
        note += f" ({record.name})"
    if record.accuracy is not None:
        note += f", test accuracy {100 * record.accuracy:.1f} %"
    return note


def _values(record: RunRecord, lang: str) -> dict:
    c = record.config
    return {"name": record.label, "epochs": c.epochs, "lr": c.lr, "momentum": c.momentum,
            "batch_size": c.batch_size, "num_workers": c.num_workers, "device": c.device,
            "pipeline": c.pipeline, "seed": c.seed, "n_train": record.n_train,
            "log_every": c.log_every, "url": pieces.TUTORIAL_URL,
            "results_file": RESULTS_FILE, "torch": (record.env or {}).get("torch") or "?",
            "threads": run_threads(record) or 0, "date": record.date}


def _settings_table(record: RunRecord, lang: str) -> str:
    """The run's settings as a markdown table: the knob's label in ``lang``, the notebook's
    constant and its value."""
    rows = [f"| {i18n.t('bundle.setting', lang)} | | |", "|---|---|---|"]
    for f in knobs(type(record.config)):
        value = getattr(record.config, f.name)
        rows.append(f"| {i18n.t(f.knob.label, lang)} | `{constant_name(f.name)}` | `{value!r}` |")
    rows.append(f"| {i18n.t('bundle.network', lang)} | `Net` | "
                f"`{'Net()' if record.config.model.is_tutorial else record.config.model.to_dict()}` |")
    return "\n".join(rows)


def _compare(record: RunRecord, lang: str) -> str:
    epochs = [e.get("mean_loss") for e in record.results.get("epochs") or []
              if isinstance(e, dict)]
    epochs = [float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None
              for v in epochs]
    parts = {"accuracy": repr(record.accuracy), "epoch_losses": repr(epochs),
             "results_file": repr(RESULTS_FILE)}
    for key in ("accuracy", "losses", "weights"):
        parts[f"t_{key}"] = repr(i18n.t(f"bundle.nb.print_{key}", lang))
    return pieces.fill(COMPARE, parts)


def short_class_names(classes) -> list[str]:
    """The tutorial's short names (plane, car, ...) of CIFAR-10's classes, others as they are."""
    return [TUTORIAL_SHORT_NAMES[CIFAR10_CLASSES.index(c)] if c in CIFAR10_CLASSES else c
            for c in classes]
