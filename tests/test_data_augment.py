"""The augmentation viewer's engine: each draw is the stored picture mirrored and moved exactly as
it says (checked by an independent numpy reconstruction with reflect padding), the same seed gives
the same draws."""
from __future__ import annotations

import numpy as np
import pytest

from cifarlab import i18n
from cifarlab.core.tricks import PAD
from cifarlab.lab.data import augment_draws, draw_text

INDICES = [3, 17, 256, 4000, 9]


def _expected(original: np.ndarray, flipped: bool, moved) -> np.ndarray:
    """H×W×3 picture mirrored, then moved (down, right) with reflect padding, as numpy does it."""
    img = original[:, ::-1] if flipped else original
    dy, dx = moved
    padded = np.pad(img.astype(np.int64), ((PAD, PAD), (PAD, PAD), (0, 0)), mode="reflect")
    h, w = img.shape[:2]
    return padded[PAD - dy:PAD - dy + h, PAD - dx:PAD - dx + w]


@pytest.mark.parametrize("kind", ["flip", "flip_translate"])
def test_each_draw_is_the_picture_mirrored_and_moved_as_it_says(cifar_data, kind):
    view = augment_draws(cifar_data, INDICES, kind, epochs=6, seed=5)
    x, _ = cifar_data.split("train")
    assert np.array_equal(view.original, np.asarray(x[INDICES]).transpose(0, 2, 3, 1))
    assert view.draws.shape == (6, len(INDICES), 32, 32, 3)
    for k in range(6):
        for i in range(len(INDICES)):
            want = _expected(view.original[i], bool(view.flipped[k, i]), view.moved[k, i])
            # the loader normalises to float32 and back: at most one grey level off
            assert np.abs(view.draws[k, i].astype(np.int64) - want).max() <= 1
    assert 0 < view.flipped.sum() < view.flipped.size          # some mirrored, some not
    if kind == "flip":
        assert not view.moved.any()
    else:
        assert np.abs(view.moved).max() <= PAD and view.moved.any()


def test_the_same_seed_draws_the_same_pictures_and_another_seed_others(cifar_data):
    a = augment_draws(cifar_data, INDICES, "flip_translate", epochs=3, seed=1)
    b = augment_draws(cifar_data, INDICES, "flip_translate", epochs=3, seed=1)
    c = augment_draws(cifar_data, INDICES, "flip_translate", epochs=3, seed=2)
    assert np.array_equal(a.draws, b.draws) and np.array_equal(a.moved, b.moved)
    assert not (np.array_equal(a.flipped, c.flipped) and np.array_equal(a.moved, c.moved))


def test_the_words_name_what_each_draw_did(cifar_data):
    view = augment_draws(cifar_data, INDICES, "flip_translate", epochs=4, seed=0)
    for lang in ("en", "es", "pt"):
        t = i18n.translator(lang)
        for k in range(4):
            for i in range(len(INDICES)):
                text = draw_text(view, k, i, t)
                assert text.startswith(t("data_aug.epoch", n=k + 1) + ": ")
                word = t("data_aug.mirrored") if view.flipped[k, i] else t("data_aug.as_is")
                assert word in text
                dy, dx = view.moved[k, i]
                if dx:
                    assert t("data_aug.right" if dx > 0 else "data_aug.left", n=abs(dx)) in text
                if not (dx or dy):
                    assert t("data_aug.not_moved") in text
