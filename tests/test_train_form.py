"""cifarlab.lab.train_form: the Train form's one owner. Values as the widgets hold them ⇄ a
TrainConfig in each language (decimal commas), presets fitted to the server's limits, a class's
pushed values and locks winning over a preset, a bad value giving its field's problem."""
from __future__ import annotations

import pytest

from cifarlab import i18n
from cifarlab.core.config import Limits, TrainConfig
from cifarlab.lab.train_form import TrainForm

LANGS = ("en", "es", "pt")
SERVER = Limits(max_epochs=20, max_train_images=50000, max_num_workers=8, devices=("cpu",))


@pytest.mark.parametrize("lang", LANGS)
def test_values_config_values_round_trip_with_the_languages_decimals(lang):
    config = TrainConfig(epochs=3, lr=0.015, momentum=0.85, batch_size=32, num_workers=0,
                         pipeline="fast", train_subset=2000, net="bn3", augment="flip",
                         label_smoothing=0.1, nesterov=True, weight_decay=0.0005, seed=7)
    form = TrainForm(lang, SERVER, n_train=50000)
    form.apply_preset(config.knob_values())
    assert form.shown("lr") == i18n.number(0.015, lang)
    assert form.shown("weight_decay") == ("0.0005" if lang == "en" else "0,0005")
    assert form.config() == config
    again = TrainForm(lang, SERVER, n_train=50000)
    again.take({name: form.shown(name) for name in form.names})   # what the widgets send
    assert again.config() == config
    # either mark is read in every language: "0,01" is no thousand and no 1
    again.take({"lr": "0,01", "momentum": "0.5"})
    assert again.config().lr == 0.01 and again.config().momentum == 0.5


def test_the_decimals_follow_the_language_and_a_bad_text_stays_as_typed():
    form = TrainForm("es", SERVER, n_train=50000)
    assert form.shown("lr") == "0,001"
    form.take({"lr": "0,02", "momentum": "0,9x"})
    assert form.shown("lr") == "0,02"      # the widget keeps the student's text as typed
    before = form.revision
    form.set_lang("en")
    assert form.shown("lr") == "0.02" and form.shown("momentum") == "0,9x"
    assert form.revision > before          # the widgets are rewritten from the form
    form.set_lang("pt")
    assert form.shown("lr") == "0,02"


@pytest.mark.parametrize("lang", LANGS)
def test_a_bad_value_gives_its_fields_problem_in_the_language(lang):
    form = TrainForm(lang, SERVER, n_train=50000)
    form.take({"lr": "0,0,1", "epochs": 30})
    problems = form.problems()
    assert problems["lr"].code == "config.lr" and problems["epochs"].code == "config.epochs_limit"
    assert form.config() is None and form.shown("lr") == "0,0,1"      # kept as typed
    said = {w.name: w.problem for w in form.widgets()}
    assert said["lr"] == i18n.t("errors.config.not_a_number", lang, why=i18n.t(
        "errors.config.lr", lang, hi=10, default=0.001))   # the box holds no number: said first
    assert said["epochs"] == i18n.t("errors.config.epochs_limit", lang, n=20)
    assert said["momentum"] is None
    form.take({"lr": "-0,5"})                                   # a number, out of range
    assert {w.name: w.problem for w in form.widgets()}["lr"] == i18n.t(
        "errors.config.lr", lang, hi=10, default=0.001)
    form.take({"lr": "0,01", "epochs": 2})
    assert form.problems() == {} and form.config().lr == 0.01


def test_presets_are_fitted_to_the_servers_limits():
    small = Limits(max_epochs=3, max_train_images=20000, max_num_workers=1, devices=("cpu",))
    form = TrainForm("en", small, n_train=50000)
    # the tutorial asks for all 50,000 images: here that is the server's 20,000
    assert form.values()["train_subset"] == 20000 and form.problems() == {}
    assert form.preset_name() == "tutorial"
    form.apply_preset("gpu_fast")
    values = form.values()
    assert (values["epochs"], values["train_subset"], values["num_workers"]) == (3, 20000, 1)
    assert form.preset_name() == "gpu_fast" and form.problems() == {}
    form.apply_preset("quick")                                   # already inside: as it is
    assert (form.values()["epochs"], form.values()["train_subset"]) == (1, 5000)
    # a Speed row's values are fitted the same way; the knobs it does not set stay
    form.take({"seed": 11})
    form.apply_preset({"epochs": 8, "lr": 0.2, "train_subset": None, "device": "cuda:0"})
    values = form.values()
    assert (values["epochs"], values["train_subset"], values["device"], values["seed"]) == \
        (3, 20000, "auto", 11)
    # a server with every image allowed keeps "all of them"
    assert TrainForm("en", SERVER, n_train=50000).values()["train_subset"] is None


def test_a_class_pushes_its_values_once_a_version_and_its_locks_win_over_a_preset():
    form = TrainForm("es", SERVER, n_train=50000)
    reason = i18n.t("errors.class.locked_reason", "es", title="Period 3")
    form.apply_class({"epochs": 1, "lr": 0.02}, {"epochs": reason}, ("blue-fox-42", 1))
    assert form.values()["epochs"] == 1 and form.shown("lr") == "0,02"
    epochs = next(w for w in form.widgets() if w.name == "epochs")
    assert epochs.disabled and reason in epochs.help
    assert not next(w for w in form.widgets() if w.name == "lr").disabled
    form.apply_preset("gpu_fast")
    assert form.values()["epochs"] == 1 and form.values()["lr"] == 0.4   # the lock wins
    # the same version again (every rerun) leaves the student's own values alone
    form.take({"lr": "0,05"})
    form.apply_class({"epochs": 1, "lr": 0.02}, {"epochs": reason}, ("blue-fox-42", 1))
    assert form.values()["lr"] == 0.05
    # a tampered browser's value reaches the server; its refusal puts the class's back
    form.take({"epochs": 3})
    assert form.config().epochs == 3
    assert form.refused("epochs") == "epochs" and form.values()["epochs"] == 1
    assert form.refused("lr") == "lr" and form.values()["lr"] == 0.05   # not locked: kept
    assert form.refused(None) is None and form.refused("config") is None
    # a new version is pushed again; leaving the class frees the knobs
    form.apply_class({"epochs": 2, "lr": 0.03}, {}, ("blue-fox-42", 2))
    assert (form.values()["epochs"], form.shown("lr")) == (2, "0,03")
    form.apply_class(None)
    assert form.locks == {} and not next(w for w in form.widgets() if w.name == "epochs").disabled


def test_revision_counts_only_the_forms_own_changes():
    form = TrainForm("en", SERVER, n_train=50000)
    start = form.revision
    form.take({"epochs": 4, "lr": "0.1"})
    assert form.revision == start                  # the widgets already show these
    form.apply_preset("quick")
    assert form.revision == start + 1


def test_cuda_graphs_only_on_a_cuda_device_and_a_gone_device_falls_back_to_auto():
    gpu = Limits(devices=("cpu", "cuda:0"))
    form = TrainForm("pt", gpu, n_train=50000)
    assert "cuda_graphs" in [w.name for w in form.widgets()]       # "auto" picks the GPU
    form.take({"cuda_graphs": True})
    assert form.values()["cuda_graphs"] is True
    form.take({"device": "cpu"})
    assert "cuda_graphs" not in [w.name for w in form.widgets()]
    assert form.values()["cuda_graphs"] is False                  # hidden, and off
    form.limits = Limits(devices=("cpu",))
    form.take({"device": "cuda:0"})
    assert form.values()["device"] == "auto"
    assert [w.option_labels for w in form.widgets() if w.name == "device"] == [
        (i18n.t("common.device_auto", "pt"), "cpu")]


def test_widgets_carry_the_texts_in_the_language():
    form = TrainForm("es", Limits(max_epochs=20, max_train_images=20000), n_train=50000)
    w = {x.name: x for x in form.widgets()}
    assert w["epochs"].label == i18n.t("common.epochs", "es") and w["epochs"].kind == "int"
    assert i18n.t("train.epochs_limit_help", "es", n=20) in w["epochs"].help
    assert w["train_subset"].placeholder == i18n.t("common.train_subset_all", "es", n=20000)
    assert w["lr"].kind == "float" and w["pipeline"].options == ("tutorial", "fast")
    form.take({"pipeline": "fast"})
    workers = next(x for x in form.widgets() if x.name == "num_workers")
    assert workers.disabled and workers.note == i18n.t("train.num_workers_fast", "es")


TUTORIAL_SIX = ("epochs", "lr", "momentum", "batch_size", "num_workers", "device")


def test_the_schema_says_which_knobs_are_the_tutorials_and_the_rest_are_advanced():
    form = TrainForm("en", SERVER, n_train=50000)
    first = [w.name for w in form.widgets() if not w.advanced]
    assert tuple(first) == TUTORIAL_SIX
    rest = {w.name for w in form.widgets() if w.advanced}
    assert {"pipeline", "seed", "train_subset", "net", "augment", "label_smoothing", "nesterov",
            "weight_decay", "schedule", "tta"} <= rest
    assert set(form.advanced) == set(form.names) - set(TUTORIAL_SIX)


@pytest.mark.parametrize("lang", LANGS)
def test_the_advanced_knobs_that_differ_from_the_tutorial_are_named(lang):
    form = TrainForm(lang, SERVER, n_train=50000)
    assert form.advanced_changed() == ()
    form.take({"epochs": 5, "lr": "0,01" if lang != "en" else "0.01", "batch_size": 16})
    assert form.advanced_changed() == ()          # the tutorial's own knobs never count
    form.take({"nesterov": True, "weight_decay": i18n.number(0.0005, lang)})
    assert set(form.advanced_changed()) == {"nesterov", "weight_decay"}
    form.take({"nesterov": False, "weight_decay": i18n.number(0.0, lang)})
    assert form.advanced_changed() == ()          # "0,0" is the tutorial's 0
    form.take({"label_smoothing": "abc"})         # no number: a problem is never hidden
    assert form.advanced_changed() == ("label_smoothing",)
    form.take({"label_smoothing": "0"})
    form.apply_preset("quick")                    # 5,000 images: the section shows them
    assert form.advanced_changed() == ("train_subset",)
    form.apply_preset("one_minute_cpu")
    assert {"pipeline", "net", "augment", "nesterov", "tta"} <= set(form.advanced_changed())
    form.apply_preset("tutorial")
    assert form.advanced_changed() == ()


def test_on_a_server_with_fewer_images_the_tutorial_as_fitted_is_no_change():
    small = Limits(max_epochs=20, max_train_images=20000, devices=("cpu",))
    form = TrainForm("pt", small, n_train=50000)
    assert form.values()["train_subset"] == 20000 and form.advanced_changed() == ()
    form.take({"train_subset": 10000})
    assert form.advanced_changed() == ("train_subset",)
    # the class's pushed values count as well: the student sees what was set for them
    form.apply_class({"seed": 7}, {}, ("blue-fox-42", 1))
    assert set(form.advanced_changed()) == {"train_subset", "seed"}
