"""The Train page's knobs for the lab's lessons, through the real entry point: the activation
function in the Advanced section, in en, es and pt, carried into the stored run."""
from __future__ import annotations

import pytest

from cifarlab import i18n
from test_pages_train import QUICK, expander, lab, layout, open_train, set_knobs, store, wait_for

__all__ = ["lab"]   # the fixture, shared with test_pages_train


@pytest.mark.parametrize("lang", ["en", "es", "pt"])
def test_the_activation_knob_sits_in_advanced_and_reaches_the_run(lab, lang):
    t = i18n.translator(lang)
    sid = f"activation-{lang}-session"
    at = open_train(sid, lang)
    advanced = t("train.advanced")
    assert [n for _, n, around in layout(at) if n == "train_activation" and advanced in around]
    knob = at.radio(key="train_activation")
    assert knob.label == t("common.activation") and knob.value == "relu"
    assert knob.options == [t(f"common.activation_{n}") for n in ("relu", "sigmoid", "tanh")]
    knob.set_value("sigmoid").run()
    assert expander(at, advanced).proto.expanded and not at.exception
    if lang != "en":
        return
    set_knobs(at, train_pipeline="fast", **QUICK)
    at.button(key="train_start").click().run()
    (run,) = store(lab).list_runs(session=sid)
    assert run.config["activation"] == "sigmoid"
    done = wait_for(lambda: (r := store(lab).get(run.id)).finished and r, timeout=300)
    assert done.status == "done", done.error
