"""The run as a Jupyter notebook: the exported script's cells, each under an explanation in the
student's language; it compares its own results with CIFAR Lab's at the end."""
from __future__ import annotations

import nbformat
from nbformat import v4

from cifarlab import i18n
from cifarlab.core.export.record import RunRecord
from cifarlab.core.export.render import TUTORIAL_URL, render, split_cells
from cifarlab.core.safe_text import md_escape, one_line
from cifarlab.i18n import finite

RESULTS_FILE = "notebook_run.json"


def build_notebook(record: RunRecord, lang: str = i18n.DEFAULT) -> nbformat.NotebookNode:
    """The notebook (nbformat 4) that repeats ``record``'s run, explained in ``lang``."""
    lang = i18n.normalize_lang(lang)
    threads = run_threads(record)
    values = _values(record)

    def text(name: str) -> str:
        return i18n.t(f"bundle.nb.{name}", lang, **values)

    # On the CPU the order of PyTorch's sums depends on its number of threads (from the ~20th
    # step of a run on, 1 and 2 threads differ in the last bit): the run's own count repeats it.
    code = render(record.config, notes=[source_note(record, lang)], lang=lang, notebook={
        "threads": threads, "accuracy": finite(record.accuracy),
        "epoch_losses": [finite(e.get("mean_loss")) for e in record.results.get("epochs") or []
                         if isinstance(e, dict)],
        "results_file": RESULTS_FILE,
        "texts": {k: i18n.t(f"bundle.nb.print_{k}", lang) for k in ("accuracy", "losses",
                                                                    "weights")}})
    extra = {"device": "\n\n" + (text("threads") if threads else text("threads_unknown"))}
    cells = [v4.new_markdown_cell(text("title") + "\n\n" + text("intro"))]
    for name, source in split_cells(code):
        cells += [v4.new_markdown_cell(text(name) + extra.get(name, "")),
                  v4.new_code_cell(source)]
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
    """The CPU threads the run trained with, when it ran on the CPU and that was recorded."""
    env = record.env or {}
    n = env.get("torch_threads")
    device = str(record.results.get("device") or env.get("device") or "cpu")
    return int(n) if isinstance(n, int) and n > 0 and device.startswith("cpu") else None


def source_note(record: RunRecord, lang: str = i18n.DEFAULT) -> str:
    """One line in ``lang``: the run (or checkpoint) the notebook repeats, and its accuracy."""
    note = (i18n.t("bundle.code.source_run", lang, run=one_line(record.run_id))
            if record.run_id else i18n.t("bundle.code.source_checkpoint", lang))
    if record.name:
        note += f" ({one_line(record.name)})"
    if record.accuracy is not None:
        note += ", " + i18n.t("bundle.code.source_accuracy", lang,
                              acc=i18n.percent(record.accuracy, lang, 1))
    return one_line(note)   # as the comment shows it (a no-break space becomes a space)


def _values(record: RunRecord) -> dict:
    """What the explanations may name: the run's settings and these."""
    return {**record.config.knob_values(), "name": md_escape(record.label),
            "n_train": record.n_train, "url": TUTORIAL_URL, "results_file": RESULTS_FILE,
            "torch": (record.env or {}).get("torch") or "?", "threads": run_threads(record) or 0}

