"""An experiment in a link (``/train?lr=0.01&epochs=3&hide=momentum``): the form takes the knobs
the link sets, fitted to the server's limits; a bad value is refused with a message naming the
knob and the value while the rest applies; the form's own link opens the same values again; on
the Train page itself in en/es/pt (AppTest)."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from cifarlab import i18n
from cifarlab.core.config import Limits, TrainConfig, knobs
from cifarlab.lab.train_form import TrainForm
from test_pages_train import APP, lab  # noqa: F401 - the page's fixture

SERVER = Limits(max_epochs=20, max_train_images=50000, max_num_workers=8, devices=("cpu",))


def test_every_knob_parses_its_own_text_and_refuses_another():
    kinds = {f.name: f.knob for f in knobs(TrainConfig)}
    assert kinds["lr"].parse("0.01") == 0.01 and kinds["epochs"].parse(" 3 ") == 3
    assert kinds["shuffle"].parse("false") is False and kinds["tta"].parse("ON") is True
    assert kinds["train_subset"].parse("all") is None
    for name, text in [("epochs", "2.5"), ("lr", "abc"), ("lr", "nan"), ("lr", "inf"),
                       ("shuffle", "maybe"), ("epochs", "")]:
        with pytest.raises(ValueError):
            kinds[name].parse(text)


def test_a_link_sets_its_knobs_and_the_forms_link_opens_them_again():
    form = TrainForm("es", SERVER, n_train=50000)
    assert form.link() == {}                                 # the tutorial: a bare link
    problems = form.from_link({"lr": "0.01", "epochs": "3", "batch_size": "16",
                               "augment": "flip", "pipeline": "fast", "nesterov": "true",
                               "sid": "abc"})
    assert problems == []
    values = form.values()
    assert (values["lr"], values["epochs"], values["batch_size"], values["augment"],
            values["nesterov"]) == (0.01, 3, 16, "flip", True)
    assert form.shown("lr") == "0,01"                        # the form's language
    link = form.link()
    assert link == {"lr": "0.01", "epochs": "3", "batch_size": "16", "augment": "flip",
                    "pipeline": "fast", "nesterov": "true"}
    again = TrainForm("pt", SERVER, n_train=50000)
    assert again.from_link(link) == [] and again.values() == form.values()


@pytest.mark.parametrize("lang", ["en", "es", "pt"])
def test_a_bad_value_is_refused_by_name_and_value_and_the_rest_applies(lang):
    form = TrainForm(lang, SERVER, n_train=50000)
    problems = form.from_link({"lr": "abc", "epochs": "999", "pipeline": "rocket",
                               "momentum": "0.5", "hide": "seed,wings"})
    by = {p.field: p.text(lang) for p in problems}
    assert set(by) == {"lr", "epochs", "pipeline", "hide"}
    assert "`lr`" in by["lr"] and "abc" in by["lr"]
    assert "`pipeline`" in by["pipeline"] and "rocket" in by["pipeline"]
    assert "999" in by["epochs"] and "20" in by["epochs"]      # the server's limit says why
    assert "wings" in by["hide"]
    values = form.values()
    assert (values["lr"], values["epochs"], values["momentum"]) == (0.001, 2, 0.5)
    assert form.hidden == ("seed",) and "seed" not in [w.name for w in form.widgets()]
    assert form.link()["hide"] == "seed"
    assert all("{" not in text for text in by.values())
    gpu = TrainForm(lang, SERVER, n_train=50000).from_link({"device": "cuda:3"})
    shown = pytest.importorskip("markdown_it").MarkdownIt().render(gpu[0].text(lang))
    assert "cuda:3" in shown and "cpu" in shown     # as the page's Markdown shows it


def test_a_links_text_in_its_message_is_only_text():
    """A link is written by anyone: the value and the name it carries reach the page's warning
    as characters, never as an image or a link (inside a code span, no backtick ends it)."""
    markdown_it = pytest.importorskip("markdown_it")
    image = "![x](https://example.com/x.png)"
    problems = TrainForm("en", SERVER, n_train=50000).from_link(
        {"lr": image, "hide": f"`{image}`", "device": image})   # any device name parses
    rendered = [markdown_it.MarkdownIt().render(p.text("en")) for p in problems]
    assert len(rendered) == 3 and not [h for h in rendered if "<img" in h or "<a " in h]
    value, device, hidden = rendered
    assert "https://\u200bexample.com/x.png" in device and "://example" not in device
    # the value still said, but no bare "https://…" left, which GitHub-flavoured Markdown
    # (Streamlit's) links by itself: a zero-width space keeps it text; in a code span, as it is
    assert "https://\u200bexample.com/x.png" in value and "://example" not in value
    assert "<code>ˋ![x](https://example.com/x.png)ˋ</code>" in hidden


def _open(query: dict, lang: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    for k, v in query.items():
        at.query_params[k] = v
    at.query_params["lang"] = lang
    at.switch_page("pages/train.py")
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.mark.parametrize("lang", ["en", "es", "pt"])
def test_the_train_page_opens_a_links_experiment(lab, lang):  # noqa: F811 - the fixture
    at = _open({"lr": "0.01", "epochs": "3", "batch_size": "16", "hide": "momentum"}, lang)
    assert at.text_input(key="train_lr").value == i18n.number(0.01, lang)
    assert at.number_input(key="train_epochs").value == 3
    assert at.number_input(key="train_batch_size").value == 16
    assert "train_momentum" not in {w.key for w in at.text_input}
    assert not at.warning or not any(i18n.t("train.link.problems", lang) in w.value
                                     for w in at.warning)
    share = [c.value for c in at.code if "lr=0.01" in c.value]
    assert share and "epochs=3" in share[0] and "hide=momentum" in share[0]


def test_a_bad_link_says_which_knob_and_the_page_works(lab):  # noqa: F811 - the fixture
    at = _open({"lr": "lots", "epochs": "3"}, "es")
    t = i18n.translator("es")
    warning = next(w.value for w in at.warning if t("train.link.problems") in w.value)
    assert "`lr`" in warning and "lots" in warning
    assert at.number_input(key="train_epochs").value == 3
    assert at.text_input(key="train_lr").value == i18n.number(0.001, "es")
    assert not at.error                                      # nothing else is wrong
