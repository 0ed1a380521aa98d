"""The text alternatives of the charts (cifarlab/lab/tables.py): the same numbers the charts
draw, with headers and cells in the student's language."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from cifarlab import i18n
from cifarlab.core.config import CIFAR10_CLASSES
from cifarlab.lab import tables
from cifarlab.lab.results import per_class_by_epoch

LANGS = list(i18n.LANGUAGES)


def torch_confusion(labels: torch.Tensor, preds: torch.Tensor, k: int) -> np.ndarray:
    """The confusion matrix counted by PyTorch itself: row = true class, column = predicted."""
    return torch.bincount(labels * k + preds, minlength=k * k).reshape(k, k).numpy()


@pytest.mark.parametrize("lang", LANGS)
def test_confusion_table_holds_the_matrix_with_translated_headers(lang):
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 10, (1000,), generator=g)
    preds = torch.where(torch.rand(1000, generator=g) < 0.6, labels,
                        torch.randint(0, 10, (1000,), generator=g))
    m = torch_confusion(labels, preds, 10)
    table = tables.confusion_table(m.tolist(), CIFAR10_CLASSES, lang)

    names = [i18n.t(f"classes.{c}", lang) for c in CIFAR10_CLASSES]
    assert list(table.index) == names
    assert list(table.columns) == names + [i18n.t("a11y.total_col", lang)]
    assert table.index.name == i18n.t("a11y.confusion_corner", lang)
    np.testing.assert_array_equal(table[names].to_numpy(), m)
    # a row's total is that class's number of test images
    np.testing.assert_array_equal(table[i18n.t("a11y.total_col", lang)].to_numpy(),
                                  torch.bincount(labels, minlength=10).numpy())
    # true "cat", predicted "dog": the cell PyTorch counted
    cat, dog = CIFAR10_CLASSES.index("cat"), CIFAR10_CLASSES.index("dog")
    assert table.loc[names[cat], names[dog]] == int(((labels == cat) & (preds == dog)).sum())


def test_confusion_table_keeps_foreign_class_names():
    table = tables.confusion_table([[3, 1], [0, 4]], ["ant", "cat"], "es")
    assert list(table.index) == ["ant", "gato"]
    assert table.loc["ant", "gato"] == 1


def test_per_class_table_in_each_language():
    acc = {"cat": 0.41, "ship": 0.7456, "airplane": 0.0}
    en = tables.per_class_table(list(acc.items()), "en")
    assert list(en.columns) == ["Class", "Accuracy"]
    assert en.to_dict("list") == {"Class": ["cat", "ship", "airplane"],
                                  "Accuracy": ["41.0%", "74.6%", "0.0%"]}
    es = tables.per_class_table(list(acc.items()), "es")
    assert list(es.columns) == [i18n.t("a11y.class_col", "es"), "Precisión"]
    assert es.iloc[:, 0].tolist() == ["gato", "barco", "avión"]
    assert es.iloc[:, 1].tolist() == [i18n.percent(a, "es") for a in acc.values()]
    assert es.iloc[0, 1].startswith("41,0")                 # the Spanish decimal comma
    pt = tables.per_class_table(list(acc.items()), "pt")
    assert list(pt.columns)[1] == "Acurácia"


def test_per_class_table_with_the_tutorial_ranges():
    ref = {"cat": (0.2, 0.45), "ship": (0.6, 0.8)}
    table = tables.per_class_table([("cat", 0.41), ("frog", None), ("ship", 0.7)], "en",
                                   reference=ref)
    col = i18n.t("a11y.tutorial_range_col", "en")
    assert table[col].tolist() == ["20% – 45%", "–", "60% – 80%"]
    assert table["Accuracy"].tolist() == ["41.0%", "–", "70.0%"]   # no figure: a dash


def test_per_class_by_epoch_table_from_a_runs_epoch_events():
    events = [SimpleNamespace(kind="epoch", data={"epoch": 1, "per_class_accuracy": {
                  "cat": 0.2, "dog": 0.5}}),         # as the run store's RunEvents
              SimpleNamespace(kind="epoch", data={"epoch": 2, "per_class_accuracy": {"cat": 0.35}}),
              SimpleNamespace(kind="loss", data={"step": 3})]
    table = tables.per_class_by_epoch_table(per_class_by_epoch(events), "es")
    assert list(table.columns) == ["Clase", "Época 1", "Época 2"]
    assert table.to_dict("list") == {"Clase": ["gato", "perro"],
                                     "Época 1": [i18n.percent(0.2, "es"), i18n.percent(0.5, "es")],
                                     "Época 2": [i18n.percent(0.35, "es"), "–"]}
    empty = tables.per_class_by_epoch_table(per_class_by_epoch([]), "en")
    assert isinstance(empty, pd.DataFrame) and empty.empty
