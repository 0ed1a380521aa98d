"""The engines build the pages' figures (cifarlab/lab): in the student's language, numbers with its
marks, pixel grids with whole ticks; and the small pure helpers the pages lean on (a chart's
clicked cell, the class preset's widget values, the join link). No Streamlit runtime needed."""
from __future__ import annotations

import numpy as np
import pytest

from cifarlab import i18n
from cifarlab.core.config import ModelSpec
from cifarlab.lab import charts as C
from cifarlab.lab import classroom as words
from cifarlab.lab import loss, network
from cifarlab.lab.train_form import knob_fields
from cifarlab.lab.network import figures as NF
from cifarlab.lab.train_form import knob_value, widget_value
from ui.widgets import clicked_cell


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_engine_figures_speak_the_language_and_its_number_marks(lang):
    t = i18n.translator(lang)
    table = NF.shape_table(network.analyze_stack(ModelSpec()).rows, t)
    assert table[t("network.params_col")].iloc[-1] == i18n.number(62006, lang)   # the total
    surf = loss.loss_surface("bowl", grid=11)
    paths = {"plain": loss.sgd_path("bowl", lr=0.01, steps=5),
             "momentum": loss.sgd_path("bowl", lr=0.01, momentum=0.9, steps=5)}
    contour, curves = loss.paths_figures(surf, paths, {"plain": "a", "momentum": "b"}, t)
    assert contour.layout.separators == curves.layout.separators == i18n.separators(lang)
    assert curves.layout.yaxis.title.text == t("common.loss")


def test_pixel_grids_tick_whole_pixels_and_colours_centre_on_zero():
    assert C.pixel_ticks(5)["dtick"] == 1 and C.pixel_ticks(32)["dtick"] == 5
    assert C.pixel_ticks(64)["dtick"] == 10
    signed = C.colour_limits(np.array([[-2.0, 1.0]]), signed=True)
    assert (signed["zmin"], signed["zmax"], signed["colorscale"]) == (-2.0, 2.0, C.DIVERGING)
    assert C.colour_limits(np.zeros((2, 2)), signed=False)["zmax"] == 1.0   # never a 0..0 scale
    fig = C.grid_figure(np.ones((3, 3)), "k", text=True)
    assert fig.data[0].texttemplate and fig.layout.yaxis.autorange == "reversed"


def test_a_clicked_cell_is_read_from_the_charts_selection():
    class Event:
        selection = {"points": [{"x": 4, "y": 7}, {"x": "cat", "y": "dog"}, "junk"]}

    assert clicked_cell(Event()) == (7, 4)          # the last point with cell numbers
    assert clicked_cell(None) is None and clicked_cell(object()) is None


def test_the_class_preset_form_reads_decimals_in_either_notation():
    kinds = {f.name: f.knob.kind for f in knob_fields()}   # what the console does
    shown = {n: widget_value(kinds[n], v, "es") for n, v in {"lr": 0.005, "epochs": 3}.items()}
    assert shown["lr"] == "0,005" and shown["epochs"] == 3
    typed = dict(shown, lr="0,02", momentum="not a number", epochs=4.0)
    values = {n: knob_value(kinds[n], v) for n, v in typed.items()}
    assert values["lr"] == pytest.approx(0.02) and values["epochs"] == 4
    assert isinstance(values["epochs"], int)
    assert values["momentum"] == "not a number"   # left for the engine's own message
    assert words.shown(0.5, "pt") == "0,5" and words.shown(None, "en") == "–"


def test_the_join_link_is_absolute_when_the_page_knows_its_address_and_names_no_language():
    # no language: each student's browser picks their own (the instructor's is not theirs)
    assert words.join_link("https://lab.example:8501/classroom?x=1&lang=es", "K7M-4PX") == \
        "https://lab.example:8501/?class=K7M-4PX"
    assert words.join_link(None, "a b") == "/?class=a+b"
    assert words.qr_png("/?class=x").startswith(b"\x89PNG")
