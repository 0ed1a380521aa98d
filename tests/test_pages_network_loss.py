"""The Network and Loss & Optimizer pages through the real entry point (app.py): they render in
every language, and their calculator, layer-stack editor and optimizer demo react to input.
Each page draws only its open tab (the lesson first): a test opens the tab it reads."""
from __future__ import annotations

import json

import pytest
import torch
from streamlit.testing.v1 import AppTest

from cifarlab import i18n
from page_text import each_tab, open_tab

APP = "../app.py"


@pytest.fixture
def open_page(monkeypatch, cifar_archive):
    monkeypatch.setenv("CIFARLAB_DATA", str(cifar_archive))

    def open_(page: str, lang: str = "en", tab: str | None = None) -> AppTest:
        """The page in ``lang``, with the tab titled by the catalog key ``tab`` open."""
        at = AppTest.from_file(APP, default_timeout=120)
        at.query_params["lang"] = lang
        at.run()
        at.switch_page(f"pages/{page}.py")
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        if tab:
            open_tab(at, i18n.t(tab, lang))
        return at

    return open_


def texts(at: AppTest, kind: str) -> list[str]:
    return [e.value for e in getattr(at, kind)]


def everything(at: AppTest) -> str:
    parts = []
    for kind in ("markdown", "success", "info", "warning", "error", "caption", "code"):
        parts += texts(at, kind)
    return "\n".join(parts)


@pytest.mark.parametrize("lang", ["en", "es", "pt"])
def test_both_pages_render_in_every_language(open_page, lang):
    t = i18n.translator(lang)
    at = open_page("network", lang)
    assert at.title[0].value == t("nav.network")
    # a first visit draws the lesson alone: no chart, table or result of the other tabs
    assert at.tabs[0].label == t("lesson.title") and at.markdown
    assert not at.metric and not at.dataframe and not at.get("plotly_chart")
    seen = {}
    for label in each_tab(at):
        assert not at.error, (label, texts(at, "error"))
        seen[label] = everything(at), [m.value for m in at.metric], [d.value for d in at.dataframe]
    assert seen[t("network.calc_title")][1] == ["28"]            # the calculator: 32, k=5
    body = "\n".join(text for text, _, _ in seen.values())
    assert t("network.fc1_inputs", n=400, c=16, h=5, w=5) in body
    assert t("network.total_params", n=62006) in body   # "62.006" in es and pt
    assert t("network.torch_agrees", value="").split("{")[0][:10] in body
    assert t("network.pool_torch_agrees") in body
    table = seen[t("network.arch_title")][2][0]
    assert list(table[t("network.out_shape_col")])[:7] == [
        "3×32×32", "6×28×28", "6×28×28", "6×14×14", "16×10×10", "16×10×10", "16×5×5"]
    # each layer's count and, in the last row, their sum: the total stated under the table
    assert list(table[t("network.layer_col")])[-1] == t("network.total_row")
    assert list(table[t("network.params_col")])[-1] == i18n.number(62006, lang)

    at = open_page("loss", lang, tab="loss.logits_title")
    assert not at.error, texts(at, "error")
    assert at.title[0].value == t("nav.loss")
    by_hand, torch_ = (m.value for m in at.metric)
    assert by_hand == torch_                                      # in the locale's notation
    assert (by_hand.count(",") == 1) == (lang != "en")
    assert 1.5 < float(by_hand.replace(",", ".")) < 3.5          # untrained: about ln 10
    assert t("loss.agree") in everything(at)


def test_what_a_tab_was_given_outlives_a_visit_to_another_tab(open_page):
    """Only the open tab runs, yet a value typed in one survives reruns in another."""
    at = open_page("network", tab="network.calc_title")
    at.text_input(key="calc_kernel_conv").set_value("3").run()
    assert at.metric[0].value == "30"
    open_tab(at, i18n.t("network.edit_title"))
    assert not at.metric and at.number_input(key="edit_k2").value == 5
    at.number_input(key="edit_k2").set_value(3).run()
    at.run()
    open_tab(at, i18n.t("network.calc_title"))
    assert at.text_input(key="calc_kernel_conv").value == "3" and at.metric[0].value == "30"
    open_tab(at, i18n.t("network.edit_title"))
    assert at.number_input(key="edit_k2").value == 3


def test_calculator_reacts_and_warns(open_page):
    at = open_page("network", tab="network.calc_title")
    assert at.metric[0].value == "28"
    at.text_input(key="calc_kernel_conv").set_value("3").run()
    assert at.metric[0].value == "30"
    assert "⌊(32 + 2·0 − 1·(3 − 1) − 1) / 1⌋ + 1 = 30" in texts(at, "code")
    assert not at.warning
    at.text_input(key="calc_kernel_conv").set_value("4").run()
    at.text_input(key="calc_stride_conv").set_value("3").run()
    assert at.metric[0].value == "10"
    assert any(i18n.t("network.not_exact") in w for w in texts(at, "warning"))
    at.text_input(key="calc_kernel_conv").set_value("40").run()   # bigger than the input
    assert not at.exception and at.metric[0].value == "—"
    assert any("kernel of at most 32" in e for e in texts(at, "error"))
    # max pooling: padding above half the kernel is refused with a message, not an exception
    at.radio(key="calc_kind").set_value("pool").run()
    assert at.metric[0].value == "16"                            # 32, k=2, s=2
    at.text_input(key="calc_padding").set_value("3").run()
    assert not at.exception and any("half the kernel" in e for e in texts(at, "error"))


@pytest.mark.parametrize("lang", ["en", "es", "pt"])
def test_calculator_takes_a_rectangular_kernel_as_pytorch_does(open_page, lang):
    t = i18n.translator(lang)
    at = open_page("network", lang, tab="network.calc_title")
    at.text_input(key="calc_kernel_conv").set_value("(5, 2)").run()
    at.text_input(key="calc_stride_conv").set_value("(1, 4)").run()
    h, w = torch.nn.Conv2d(1, 1, (5, 2), stride=(1, 4))(torch.zeros(1, 1, 32, 32)).shape[-2:]
    assert at.metric[0].value == f"{h}×{w}" == "28×8"
    assert "\n".join([f"{t('network.dim_0')}: ⌊(32 + 2·0 − 1·(5 − 1) − 1) / 1⌋ + 1 = 28",
                      f"{t('network.dim_1')}: ⌊(32 + 2·0 − 1·(2 − 1) − 1) / 4⌋ + 1 = 8"]
                     ) in texts(at, "code")
    (warning,) = texts(at, "warning")                  # the width's 30 / 4 leaves 2 pixels
    assert warning.startswith(t("network.dim_1") + ": " + t("network.not_exact"))
    # a non-integer, a decimal comma, a kernel taller than the input: refused in the language
    for bad, says in (("2.5", "'2.5'"), ("2,5", "(5, 2)"), ("(40, 2)", "40×2")):
        at.text_input(key="calc_kernel_conv").set_value(bad).run()
        assert not at.exception and t("network.exact") not in texts(at, "success")
        (message,) = texts(at, "error")
        assert says in message
        assert {"en": "the input is", "es": "la entrada", "pt": "a entrada"}[lang] in message \
            if bad == "(40, 2)" else {"en": "must", "es": "debe", "pt": "deve"}[lang] in message


def test_edited_stack_recomputes_fc1_and_shows_pytorchs_error(open_page):
    at = open_page("network", tab="network.edit_title")
    at.number_input(key="edit_k2").set_value(3).run()
    assert not at.exception
    body = everything(at)
    assert i18n.t("network.fc1_inputs", n=576, c=16, h=6, w=6) in body
    assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x576 and 400x120)" in body
    assert "RuntimeError: shape '[-1, 400]' is invalid for input of size 2304" in body
    assert "nn.Linear(16 * 6 * 6, 120)" in body
    (edited,) = [d.value for d in at.dataframe]
    assert "16×6×6" in list(edited[i18n.t("network.out_shape_col")])
    assert i18n.number(576 * 120 + 120) in list(edited[i18n.t("network.params_col")])


def test_a_bad_stack_gives_the_message_not_an_exception(open_page):
    at = open_page("network", tab="network.edit_title")
    at.number_input(key="edit_k2").set_value(15).run()
    assert not at.exception
    errors = texts(at, "error")
    assert any(i18n.t("network.shape_error_title") in e and "conv2" in e for e in errors), errors
    assert "Kernel size can't be greater than actual input size" in everything(at)


def test_convolution_and_pooling_visualizers_react(open_page):
    at = open_page("network", tab="network.conv_title")
    at.selectbox(key="conv_kernel").set_value("net0").run()
    at.slider(key="conv_row").set_value(0).run()
    at.slider(key="conv_col").set_value(27).run()
    assert not at.exception and not at.error
    assert any("75" in m for m in texts(at, "markdown"))         # 3×5×5 products
    # the pool tab pools that map: its crop starts where the conv tab's output pixel is
    open_tab(at, i18n.t("network.pool_title"))
    assert (at.slider(key="pool_top").value, at.slider(key="pool_left").value) == (0, 20)
    at.radio(key="pool_kernel").set_value(3).run()
    at.radio(key="pool_stride").set_value(1).run()
    assert not at.exception and not at.error
    assert i18n.t("network.pool_torch_agrees") in texts(at, "success")


def test_pixel_grids_have_whole_number_ticks_and_the_max_marker_leaves_its_number(open_page):
    at = open_page("network", tab="network.conv_title")
    specs = {c.key: json.loads(c.proto.spec) for c in at.get("plotly_chart")}
    open_tab(at, i18n.t("network.pool_title"))
    specs |= {c.key: json.loads(c.proto.spec) for c in at.get("plotly_chart")}
    kernel = specs["conv_kernel_fig"]["layout"]            # a 5×5 kernel: one tick per pixel
    assert kernel["xaxis"]["dtick"] == 1 and kernel["yaxis"]["dtick"] == 1
    assert specs["conv_input"]["layout"]["xaxis"]["dtick"] == 5       # 32 pixels
    pool = specs["pool_in_fig"]
    marker = next(tr for tr in pool["data"] if tr.get("type") == "scatter")
    cells = next(tr for tr in pool["data"] if tr.get("type") == "heatmap")
    assert cells["texttemplate"]                           # the 8×8 crop shows its numbers
    # each star at its cell's centre, that cell's number written just under it
    assert all(x == round(x) for x in marker["x"]) and all(y == round(y) for y in marker["y"])
    assert marker["textposition"] == "bottom center" and len(marker["text"]) == len(marker["x"])


def test_loss_page_says_when_the_loss_explodes(open_page):
    at = open_page("loss", tab="loss.optimizer_title")
    assert not any("exploded" in e for e in texts(at, "error"))   # lr 0.05 is fine
    at.select_slider(key="opt_lr").set_value(0.5).run()
    assert not at.exception
    errors = texts(at, "error")
    assert len(errors) == 2, errors                                # both paths blow up
    assert all("the loss exploded after" in e for e in errors)
    at.select_slider(key="opt_lr").set_value(0.3).run()            # only plain SGD blows up
    errors = texts(at, "error")
    assert len(errors) == 1 and i18n.t("loss.plain_sgd") in errors[0]
    # moving the true class's score changes the loss, and both sides still agree
    open_tab(at, i18n.t("loss.logits_title"))
    before = at.metric[0].value
    at.slider(key="loss_boost").set_value(5.0).run()
    after = at.metric[0].value
    assert float(after) < float(before) and at.metric[0].value == at.metric[1].value


@pytest.mark.parametrize("lang", ["es", "pt"])
def test_calculator_bad_values_say_why_in_the_language_and_never_show_a_stale_result(open_page,
                                                                                  lang):
    at = open_page("network", lang, tab="network.calc_title")
    assert at.metric[0].value == "28"
    for key, bad in (("calc_stride_conv", "0"), ("calc_padding", "-1"),
                     ("calc_kernel_conv", "0")):
        at.text_input(key=key).set_value(bad).run()
        exact = i18n.t("network.exact", lang)
        assert not at.metric and exact not in texts(at, "success"), key   # no stale result
        (message,) = texts(at, "error")
        assert "debe" in message if lang == "es" else "deve" in message
        at.text_input(key=key).set_value({"calc_stride_conv": "1", "calc_padding": "0",
                                          "calc_kernel_conv": "5"}[key]).run()
        assert at.metric[0].value == "28" and not at.error


@pytest.mark.parametrize("lang", ["en", "es", "pt"])
def test_the_activation_tab_teaches_why_relu_in_the_language(open_page, lang):
    t = i18n.translator(lang)
    at = open_page("network", lang, tab="network.act_title")
    body = everything(at)
    assert i18n.lesson("activation", lang).splitlines()[0].lstrip("# ") in body
    assert any("F.relu(self.fc1(x))" in c for c in texts(at, "code"))   # the tutorial's lines
    (fig,) = [json.loads(c.proto.spec) for c in at.get("plotly_chart") if c.key == "act_fig"]
    assert [d["name"] for d in fig["data"] if d.get("showlegend", True)] == [
        t(f"common.activation_{n}") for n in ("relu", "sigmoid", "tanh")]


@pytest.mark.parametrize("lang", ["en", "es", "pt"])
def test_the_mountain_range_shows_plain_sgd_stuck_and_momentum_through(open_page, lang):
    t = i18n.translator(lang)
    at = open_page("loss", lang, tab="loss.optimizer_title")
    at.selectbox(key="opt_surface").set_value("mountains").run()
    assert not at.exception
    assert any(w.startswith(f"**{t('loss.plain_sgd')}**: {t('loss.stuck')}")
               for w in texts(at, "warning"))
    assert any(t("loss.converges") in s for s in texts(at, "success"))
    assert t("loss.mountains_note") in texts(at, "markdown")
    import json
    titles = [json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "")
              for c in at.get("plotly_chart")]
    formula = {"en": "0.4 (x² + y²) + 2 (2 − cos 1.5x − cos 1.5y)",
               "es": "0,4 (x² + y²) + 2 (2 − cos 1,5x − cos 1,5y)",
               "pt": "0,4 (x² + y²) + 2 (2 − cos 1,5x − cos 1,5y)"}[lang]
    assert any(formula in title for title in titles), titles
