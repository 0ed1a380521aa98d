"""One schema: a field added to TrainConfig (here, to a subclass) appears in the command line,
the Train page's knobs and the validator without editing those files."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from cifarlab import cli, i18n
from cifarlab.core.config import Limits, TrainConfig, knob, knobs, validate
from cifarlab.lab import train_form


@dataclass(frozen=True)
class WithDropout(TrainConfig):
    """The tutorial's config and one more knob, as a contributor would add it."""

    dropout: float = knob(0.0, kind="float", lo=0, hi=1, hi_open=True, step=0.1,
                          label="common.value", help="common.value", error="config.momentum")


def test_the_new_field_is_a_knob_with_its_bounds():
    names = [f.name for f in knobs(WithDropout)]
    assert names[-1] == "dropout" and names[:-1] == [f.name for f in knobs(TrainConfig)]
    assert [p.field for p in validate({"dropout": 1.5}, cls=WithDropout)] == ["dropout"]
    assert validate({"dropout": 0.5}, cls=WithDropout) == []
    assert WithDropout(dropout=0.25).to_dict()["dropout"] == 0.25


def test_the_command_line_gets_a_flag_for_it():
    import argparse

    parser = argparse.ArgumentParser()
    cli.add_config_args(parser, WithDropout)
    cli._add_model_args(parser)
    args = parser.parse_args(["--dropout", "0.3", "--epochs", "1"])
    cfg = cli.config_from_args(args, WithDropout)
    assert cfg.dropout == 0.3 and cfg.epochs == 1 and cfg.lr == TrainConfig().lr
    assert "--dropout" in parser.format_help()


def test_every_config_field_has_a_flag_in_the_real_cli():
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")
    train_help = sub.choices["train"].format_help()
    for f in knobs():
        assert "--" + f.name.replace("_", "-") in train_help, f.name


@pytest.fixture
def page(tmp_path, monkeypatch):
    from test_pages_train import _stop_queue

    monkeypatch.setenv("CIFARLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CIFARLAB_SPARE_WORKERS", "0")
    monkeypatch.setattr(train_form, "CONFIG", WithDropout)
    _stop_queue()
    yield
    _stop_queue()


def test_the_train_page_shows_it_and_checks_it(page):
    from test_pages_train import open_train, texts

    at = open_train("schema-field-session")
    widget = at.text_input(key="train_dropout")   # a decimal: a text box in the notation
    assert widget.value == "0"
    widget.set_value("1,5").run()
    assert i18n.t("errors.config.momentum", "en", default=0.0) in texts(at, "error")
    at.text_input(key="train_dropout").set_value("0.5").run()
    assert not at.error and not at.exception


def test_server_limits_are_checked_by_the_same_validator():
    p = validate(TrainConfig(epochs=30, num_workers=8), limits=Limits(max_epochs=20,
                                                                       max_num_workers=4))
    assert {x.field: x.code for x in p} == {"epochs": "config.epochs_limit",
                                            "num_workers": "config.num_workers_limit"}


def test_the_run_tables_get_a_column_for_it_and_see_it_differ():
    from types import SimpleNamespace

    from cifarlab.lab import runs as R

    runs = [SimpleNamespace(id=f"{i:032x}", name="", status="done", started_at=1.0e9,
                            created_at=1.0e9, device="cpu", result={},
                            config=WithDropout(dropout=d).to_dict())
            for i, d in enumerate((0.0, 0.5))]
    df = R.runs_table(runs, WithDropout)
    assert list(df["dropout"]) == [0.0, 0.5]
    assert R.differing_columns(df, R.knob_columns(WithDropout)) == ["dropout"]
