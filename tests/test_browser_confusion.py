"""The confusion matrix in Chromium: a click on a cell picks that pair of classes (true,
predicted) in the boxes below it, for cells across the matrix (a corner and two inside), without
an error. The model is an uploaded checkpoint (the tutorial's Net with seeded random weights)."""
from __future__ import annotations


import pytest
import torch

from browser_support import POLL_MS, page_problems, wait_idle
from cifarlab import i18n
from cifarlab.core import checkpoint
from cifarlab.core.config import CIFAR10_CLASSES, TrainConfig
from cifarlab.core.model import Net

pytestmark = pytest.mark.browser


CELL_JS = """([row, col]) => {
    const plot = [...document.querySelectorAll('.js-plotly-plot')]
        .find(p => p.data && p.data.some(tr => tr.type === 'heatmap'));
    const xa = plot._fullLayout.xaxis, ya = plot._fullLayout.yaxis;
    const box = plot.getBoundingClientRect();
    const x = box.left + xa._offset + xa.l2p(col), y = box.top + ya._offset + ya.l2p(row);
    return [x, y];
}"""


HEATMAP_READY_JS = """() => [...document.querySelectorAll('.js-plotly-plot')]
    .some(p => p.data && p.data.some(tr => tr.type === 'heatmap') && p._fullLayout)"""


def test_a_click_on_any_cell_picks_that_pair(server, browser, tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "random_net.pth"
    checkpoint.save(path, Net(), TrainConfig(), CIFAR10_CLASSES, {})
    t = i18n.translator("es")
    page = browser.new_page(viewport={"width": 1400, "height": 2400})
    try:
        page.goto(f"{server.url}/results?lang=es&sid=confusion-student-01")
        wait_idle(page)
        page.get_by_text(t("results.source_upload"), exact=True).click()
        wait_idle(page)
        page.locator('input[type="file"]').first.set_input_files(str(path))
        wait_idle(page, timeout_ms=300_000)   # the first predictions over 10,000 images
        page.wait_for_function(HEATMAP_READY_JS, timeout=120_000, polling=POLL_MS)
        names = [t(f"classes.{c}") for c in CIFAR10_CLASSES]
        # a corner off the diagonal (a transposed axis picks (9, 0), a flipped one (0, 0) or
        # (9, 9)) and two cells inside, on either side of the diagonal (a scale or offset error
        # lands on a neighbour)
        cells = [(0, 9), (3, 6), (7, 2)]
        for row, col in cells:
            x, y = page.evaluate(CELL_JS, [row, col])
            page.mouse.click(x, y)
            wait_idle(page)
            assert not page_problems(page), (row, col)
            true_box = page.get_by_role("combobox", name=t("results.filter_true"), exact=True)
            pred_box = page.get_by_role("combobox", name=t("results.filter_predicted"),
                                        exact=True)
            assert (true_box.input_value(), pred_box.input_value()) == (names[row], names[col])
    finally:
        page.close()
