"""Text alternatives for charts: their numbers as tables a screen reader can walk ("55,3 %")."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from cifarlab import i18n
from cifarlab.core.config import CIFAR10_CLASSES


def class_name(name: str, lang: str) -> str:
    """A class's name in ``lang`` ("gato"); a class that is not CIFAR-10's, as it is."""
    return i18n.t(f"classes.{name}", lang) if name in CIFAR10_CLASSES else str(name)


def confusion_table(confusion, classes: Sequence[str], lang: str) -> pd.DataFrame:
    """The confusion matrix (a row per true class, a column per prediction) and row totals."""
    m = np.asarray(confusion)
    names = [class_name(c, lang) for c in classes]
    table = pd.DataFrame(m.astype(int), index=pd.Index(names, name=i18n.t(
        "a11y.confusion_corner", lang)), columns=names)
    table[i18n.t("a11y.total_col", lang)] = table.sum(axis=1)
    return table


def per_class_table(items: Sequence[tuple[str, float]], lang: str,
                    reference: Mapping[str, Sequence[float]] | None = None) -> pd.DataFrame:
    """(class, accuracy) pairs as percentages, with the tutorial's range when ``reference``."""
    rows = {
        i18n.t("a11y.class_col", lang): [class_name(c, lang) for c, _ in items],
        i18n.t("a11y.accuracy_col", lang): [i18n.percent(a, lang) for _, a in items],
    }
    if reference is not None:
        rows[i18n.t("a11y.tutorial_range_col", lang)] = [
            f"{i18n.percent(reference[c][0], lang, 0)} – {i18n.percent(reference[c][1], lang, 0)}"
            if c in reference else "–" for c, _ in items]
    return pd.DataFrame(rows)


def per_class_by_epoch_table(long: pd.DataFrame, lang: str) -> pd.DataFrame:
    """``per_class_by_epoch``'s frame wide: a row per class, a column per epoch."""
    wide = long.pivot_table(index="class", columns="epoch", values="accuracy", aggfunc="last",
                            sort=False).sort_index(axis=1)
    table = wide.map(lambda a: i18n.percent(a, lang))
    table.columns = [i18n.t("a11y.epoch_col", lang, n=int(e)) for e in wide.columns]
    table.insert(0, i18n.t("a11y.class_col", lang), [class_name(c, lang) for c in wide.index])
    return table.reset_index(drop=True)
