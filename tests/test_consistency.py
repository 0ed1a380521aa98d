"""What one part of the lab says, another says the same way, in en, es and pt: the tutorial's
flatten line, the journey's pages, the class names of the model card, the notebook's settings
comments, the figures' axes, labels and markers, the parameter counts, the loss chart's words.
(The Runs page's downloads of a run still training: tests/test_pages_results_runs.py; one name
per class in every text: the glossary, tests/test_glossary.py.)"""
from __future__ import annotations

import re
from types import SimpleNamespace

import nbformat
import numpy as np
import pytest
import torch
from babel.lists import format_list

from cifarlab import i18n
from cifarlab.core.config import CIFAR10_CLASSES, ModelSpec, TrainConfig, knobs
from cifarlab.core.export.card import model_card
from cifarlab.core.export.notebook import notebook_json, source_note
from cifarlab.core.export.record import RunRecord
from cifarlab.core.model import Net
from cifarlab.core.safe_text import one_line
from cifarlab.lab import inside as I
from cifarlab.lab import network as convlab
from cifarlab.lab import tensors as T
from cifarlab.lab import train_live
from cifarlab.lab.network import figures as NF
from cifarlab.lab.results import TUTORIAL_REFERENCE
from cifarlab.lab.results import figures as RF
from cifarlab.lab.train import RunView

LANGS = list(i18n.LANGUAGES)
VIEW_LINE = "x = x.view(-1, 16 * 5 * 5)"


# ------------------------------------------------------------------- the tutorial's flatten line

def test_inside_shows_the_tutorials_view_line_and_it_makes_the_values():
    stages = I.activations(I.random_model(0), torch.zeros(1, 3, 32, 32))
    assert I.stage(stages, "flatten").line == VIEW_LINE
    assert not [s.name for s in stages if "torch.flatten" in s.line]
    # another network: the same line with its own sizes, and that line makes what is shown
    spec = ModelSpec(channels=(4, 8), kernels=(3, 3), paddings=(1, 1), hidden=(32, 16))
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    other = I.activations(I.random_model(1, spec), x)
    line = I.stage(other, "flatten").line
    assert line == "x = x.view(-1, 8 * 8 * 8)"
    scope = {"x": torch.from_numpy(I.stage(other, "pool2").values)[None]}
    exec(line, {}, scope)   # the line as the page prints it
    np.testing.assert_array_equal(scope["x"][0].numpy(), I.stage(other, "flatten").values)


@pytest.mark.parametrize("lang", LANGS)
def test_the_inside_lesson_and_its_code_teach_the_network_pages_line(lang):
    for name in ("inside", "network"):
        assert VIEW_LINE in i18n.code_snippet(name), name
    assert "torch.flatten" not in i18n.code_snippet("inside")
    lesson = i18n.lesson("inside", lang)
    assert "x.view(-1, 16 * 5 * 5)" in lesson and "torch.flatten" not in lesson


# ----------------------------------------------------------------------------- the journey

@pytest.mark.parametrize("lang", LANGS)
def test_homes_journey_lists_every_page_in_the_navigations_order(lang):
    from ui.nav import PAGES

    steps = re.findall(r"^(\d+)\. \*\*(.+?)\*\*", i18n.lesson("home", lang), re.M)
    assert [int(n) for n, _ in steps] == list(range(1, len(PAGES)))
    assert [name for _, name in steps] == [i18n.t(f"nav.{pid}", lang) for pid, _, _ in PAGES[1:]]


# ---------------------------------------------------------------- one name per class, per language

@pytest.mark.parametrize("lang", LANGS)
def test_the_model_card_names_the_classes_as_the_app_does(lang):
    per_class = {c: 0.5 for c in CIFAR10_CLASSES}
    record = RunRecord(TrainConfig(), {}, tuple(CIFAR10_CLASSES),
                       results={"per_class_accuracy": per_class, "test_accuracy": 0.5})
    card = model_card(record, lang)
    names = [i18n.t(f"classes.{c}", lang) for c in CIFAR10_CLASSES]
    (data,) = [line for line in card.splitlines() if line.startswith("CIFAR-10:")]
    assert format_list(names, locale=i18n.BABEL_LOCALES[lang]) in data
    for name in names:
        assert f"| {name} (`" in card   # the per-class table: the same names


# ----------------------------------------------------------- the notebook's settings, explained

@pytest.mark.parametrize("lang", ["es", "pt"])
def test_the_notebooks_settings_comments_are_in_the_bundles_language(lang):
    config = TrainConfig()
    record = RunRecord(config, Net(config.model).state_dict(), tuple(CIFAR10_CLASSES),
                       results={"test_accuracy": 0.535}, run_id="abc123")
    nb = nbformat.reads(notebook_json(record, lang), as_version=4)
    (cell,) = [c.source for c in nb.cells
               if c.cell_type == "code" and "LEARNING_RATE =" in c.source]
    comments = " ".join(line[2:] for line in cell.splitlines() if line.startswith("# "))
    assert one_line(source_note(record, lang)) in comments   # a comment is one plain line
    assert one_line(i18n.percent(0.535, lang, 1)) in comments
    assert i18n.t("bundle.code.settings", lang) in comments
    assert max(len(line) for line in cell.splitlines()) <= 100   # wrapped, as the linter wants
    for f in knobs(TrainConfig):
        if f.name == "val_fraction":   # the tutorial's 0 holds nothing out: no setting to explain
            continue
        said = i18n.t(f.knob.help, lang)
        assert said in comments, f.name
        if said != i18n.t(f.knob.help, "en"):
            assert i18n.t(f.knob.help, "en") not in comments, f.name
    assert i18n.t("bundle.code.model", lang) in comments
    assert "One of:" not in comments and "This run's settings" not in comments
    compile(cell, "settings", "exec")


# ------------------------------------------------------------------------- the figures

def test_the_tensors_heatmap_axes_are_the_channels_pixels():
    t = i18n.translator("es")
    values = np.random.default_rng(0).uniform(-1, 1, (32, 32)).astype(np.float32)
    matrix = T.RankExample(rank=2, shape=(32, 32), values=values, pixels=None)
    fig = T.rank_figure(matrix, CIFAR10_CLASSES, t)
    x, y = fig.layout.xaxis, fig.layout.yaxis
    assert tuple(x.range) == (-0.5, 31.5) and tuple(y.range) == (31.5, -0.5)   # row 0 on top
    assert x.constrain == y.constrain == "domain" and y.scaleanchor == "x"   # square pixels
    for axis in (x, y):   # whole pixels only
        assert axis.tickmode == "linear" and axis.tick0 == 0 and axis.dtick == int(axis.dtick)
    vector = T.RankExample(rank=1, shape=(32,), values=values[0], pixels=None)
    x = T.rank_figure(vector, CIFAR10_CLASSES, t).layout.xaxis
    assert tuple(x.range) == (-0.5, 31.5) and x.dtick == int(x.dtick)


@pytest.mark.parametrize("lang", LANGS)
def test_the_tutorials_figure_is_in_the_legend_not_on_the_bars(lang):
    t = i18n.translator(lang)
    ev = SimpleNamespace(accuracy=0.6, classes=list(CIFAR10_CLASSES),
                         per_class_accuracy={c: 0.55 for c in CIFAR10_CLASSES})
    fig = RF.accuracy_figure(ev.per_class_accuracy, t)
    label = t("results.tutorial_figure", pct=RF.pct(TUTORIAL_REFERENCE["accuracy"], lang, 0))
    assert not [a for a in fig.layout.annotations if a.text == label]
    (entry,) = [d for d in fig.data if d.name == label]
    assert entry.mode == "lines" and entry.showlegend is not False
    assert entry.line.dash == "dash"
    (line,) = fig.layout.shapes   # the line itself still crosses the chart
    assert line.y0 == line.y1 == pytest.approx(100 * TUTORIAL_REFERENCE["accuracy"])
    assert line.line.dash == entry.line.dash and line.line.color == entry.line.color


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("size, kernel, stride", [(8, 2, 2), (8, 3, 1), (28, 2, 2)])
def test_the_pool_stars_sit_at_the_centre_of_their_cells(lang, size, kernel, stride):
    t = i18n.translator(lang)
    region = np.random.default_rng(size).uniform(0, 3, (size, size)).astype(np.float32)
    pooled = convlab.maxpool_windows(region, kernel, stride)
    fig, _ = NF.pool_figures(region, pooled, 0, kernel, t)
    (star,) = [d for d in fig.data if d.type == "scatter"]
    assert star.marker.symbol == "star"
    maxima = [w["argmax"] for w in pooled["windows"]]
    assert list(star.x) == [c for _, c in maxima] and list(star.y) == [r for r, _ in maxima]
    if size > 8:   # no numbers written in on a large grid
        return
    # each max's number, under its star; every other cell keeps its own
    assert list(star.text) == [i18n.number(float(region[r, c]), lang, 2) for r, c in maxima]
    assert star.textposition == "bottom center"
    (heat,) = [d for d in fig.data if d.type == "heatmap"]
    for r in range(size):
        for c in range(size):
            want = "" if (r, c) in maxima else i18n.number(float(region[r, c]), lang, 2)
            assert heat.text[r][c] == want, (r, c)


@pytest.mark.parametrize("lang", LANGS)
def test_the_layers_parameters_add_up_to_the_total_the_page_states(lang):
    t = i18n.translator(lang)
    report = convlab.analyze_stack(ModelSpec())
    table = NF.shape_table(report.rows, t)
    layers, params = list(table[t("network.layer_col")]), list(table[t("network.params_col")])
    assert layers[-1] == t("network.total_row")
    assert params[-1] == i18n.number(report.total_params, lang) == i18n.number(62006, lang)
    assert params[layers.index("fc1")] == i18n.number(400 * 120 + 120, lang)   # "48,120"
    assert sum(int(p.replace(",", "").replace(".", "")) for p in params[:-1]) == 62006


@pytest.mark.parametrize("lang", LANGS)
def test_the_loss_charts_caption_names_what_its_legend_names(lang):
    v = RunView(max_points=8)
    v.add_events([SimpleNamespace(seq=1, kind="start",
                                  data={"total_steps": 100, "steps_per_epoch": 50})])
    v.series.add(list(range(1, 41)), list(np.linspace(2.3, 1.5, 40)))
    assert v.series.stride > 1   # a long run: its points are means of several steps
    fig = train_live.loss_figure(v.chart(), lang)[1]
    caption, _ = train_live.chart_texts(v, 500, lang)
    legend = fig.data[0].name
    assert legend == i18n.t("train.chart_step_loss_mean", lang, n=v.series.stride)
    assert legend in caption and i18n.t("train.running_loss", lang) in caption
    assert "500" in caption and "2.000" not in caption and "2,000" not in caption
    short = RunView(max_points=100)   # every step drawn: "each step", in both
    short.series.add([1, 2, 3], [2.3, 2.2, 2.1])
    name = train_live.loss_figure(short.chart(), lang)[1].data[0].name
    assert name == i18n.t("train.chart_step_loss", lang)
    assert name in train_live.chart_texts(short, 2000, lang)[0]
