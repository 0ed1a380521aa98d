"""Network: the Net layer by layer, output sizes, an editable stack, conv and pooling by hand."""
from __future__ import annotations

import numpy as np
import streamlit as st

from cifarlab.core.config import ModelSpec
from cifarlab.lab import network as convlab
from cifarlab.lab.network import figures as F
from ui.data import get_data
from ui.language import call_or_show, num, translator
from ui.nav import lesson

t = translator()

st.title(t("nav.network"))
# Only the open tab runs: a first visit draws the lesson alone, not six tabs of charts unseen.
tab_lesson, tab_arch, tab_calc, tab_edit, tab_conv, tab_pool, tab_act = st.tabs([
    t("lesson.title"), t("network.arch_title"), t("network.calc_title"), t("network.edit_title"),
    t("network.conv_title"), t("network.pool_title"), t("network.act_title")],
    key="network_tab", on_change="rerun")
KEEP = "page"   # persist_state: a widget's value outlives its tab being closed


@st.cache_data(max_entries=32, show_spinner=False)
def stack_report(spec: ModelSpec) -> convlab.StackReport:
    return convlab.analyze_stack(spec)


def show_table(rows: list[dict], key: str) -> None:
    st.dataframe(F.shape_table(rows, t), hide_index=True, key=key,
                 height=35 * (len(rows) + 2) + 3,   # the header, the rows, their total
                 column_config={
                     t("network.formula_col"): st.column_config.TextColumn(width="large")})


def fc1_line(report) -> str:
    c, h, w = report.flat_shape
    return (t("network.fc1_inputs", n=report.flat, c=c, h=h, w=w) + " · "
            + t("network.total_params", n=num(report.total_params)))


def arch() -> None:
    st.markdown(t("network.arch_intro"))
    tutorial = stack_report(ModelSpec())
    show_table(tutorial.rows, "arch_table")
    st.markdown(fc1_line(tutorial))


def calc() -> None:
    st.markdown(t("network.calc_intro"))
    kind = st.radio(t("network.layer_type"), ["conv", "pool"], horizontal=True, key="calc_kind",
                    format_func=lambda k: t(f"network.layer_{k}"), persist_state=KEEP)
    cols = st.columns(5)
    # text, as nn.Conv2d takes it ("5" or "(5, 2)"); the engine refuses what PyTorch would
    conv = kind == "conv"
    args = [col.text_input(t(f"network.{name}"), value, key=key, help=t("network.pair_help"),
                           persist_state=KEEP)
            for col, name, value, key in zip(cols, (
                "input_size", "kernel", "padding", "stride", "dilation"), (
                "32", "5" if conv else "2", "0", "1" if conv else "2", "1"), (
                "calc_size", f"calc_kernel_{kind}", "calc_padding", f"calc_stride_{kind}",
                "calc_dilation"))]
    res = convlab.calculator(kind, *args)
    two = len(res["dims"]) == 2
    if res["dims"]:
        left, right = st.columns([1, 3])
        left.metric(t("network.result"), res["shown"])
        right.markdown(f"**{t('network.formula')}**")
        right.code("\n".join((t(f"network.dim_{i}") + ": " if two else "") + d["formula"]
                             for i, d in enumerate(res["dims"])), language=None)
    if res["shape_error"] is not None:
        st.error(res["shape_error"].text(t.lang))
    else:
        for i, d in enumerate(res["dims"]):
            if not d["exact"]:
                st.warning((t(f"network.dim_{i}") + ": " if two else "") + t("network.not_exact")
                           + " " + t("network.remainder", n=d["remainder"], s=d["stride"]))
        if res["exact"]:
            st.success(t("network.exact"))


def edit() -> None:
    st.markdown(t("network.edit_intro"))
    d = ModelSpec()
    values: dict[str, list[int]] = {"channels": [], "kernels": [], "paddings": [], "strides": []}
    for i, col in enumerate(st.columns(2)):
        layer = f"conv{i + 1}"
        col.markdown(f"**{layer}**")
        a, b = col.columns(2)
        for where, name, label, lo, hi, key in (
                (a, "channels", t("network.channels", layer=layer), 1, 256, "c"),
                (b, "kernels", t("network.kernel"), 1, 31, "k"),
                (a, "paddings", t("network.padding"), 0, 15, "p"),
                (b, "strides", t("network.stride"), 1, 8, "s")):
            values[name].append(int(where.number_input(label, lo, hi, getattr(d, name)[i],
                                                       key=f"edit_{key}{i + 1}",
                                                       persist_state=KEEP)))
    size = st.columns(3)[0].number_input(t("network.pool_size"), 1, 8, d.pool, key="edit_pool",
                                         help=t("network.pool_size_help"), persist_state=KEEP)
    # the widgets' bounds are inside ModelSpec's: the stack is always one it accepts; fc1 and
    # fc2 keep the tutorial's 120 and 84 (what a stack changes is fc1's input)
    report = stack_report(ModelSpec(**{k: tuple(v) for k, v in values.items()}, pool=int(size)))
    if report.ok:
        (st.success if report.flat == convlab.TUTORIAL_FLAT else st.info)(fc1_line(report))
        show_table(report.rows, "edit_table")
    else:
        st.error(f"**{t('network.shape_error_title')}** — {report.shape_error.text(t.lang)}")
    if report.view_error or report.flatten_error:
        st.markdown(t("network.hardcoded_intro"))
        st.markdown(t("network.with_view"))
        st.code(report.view_error, language=None)
        st.markdown(t("network.with_flatten"))
        st.code(report.flatten_error, language=None)
        if report.ok:
            c, h, w = report.flat_shape
            st.markdown(t("network.hardcoded_fix", c=c, h=h, w=w, n=report.flat,
                          hidden=d.hidden[0]))
    elif report.ok:
        st.markdown(t("network.hardcoded_ok"))


def conv_map(data, index: int, choice: str):
    """The image, its example kernel and its map: the conv tab's, pooled by the pool tab."""
    hwc = data.image("test", index)
    ex = F.conv_example(hwc, choice, seed=0)   # "net" kernels: an untrained Net's conv1
    return hwc, ex, convlab.apply_kernel(ex.image, ex.kernel, ex.bias)


def conv(data) -> None:
    st.markdown(t("network.conv_intro"))
    cols = st.columns([1, 2])
    index = int(cols[0].number_input(t("network.image_index", n=data.n_test - 1), 0,
                                     data.n_test - 1, 0, key="conv_index", persist_state=KEEP))
    choice = cols[1].selectbox(t("network.kernel_choice"), F.kernel_options(), key="conv_kernel",
                               format_func=lambda name: F.kernel_label(name, t),
                               persist_state=KEEP)
    hwc, ex, fmap = conv_map(data, index, choice)
    st.caption(t(ex.caption))
    oh, ow = fmap.shape
    a, b = st.columns(2)
    row = a.slider(t("network.out_row"), 0, oh - 1, min(oh // 2, oh - 1), key="conv_row",
                   persist_state=KEEP)
    col = b.slider(t("network.out_col"), 0, ow - 1, min(ow // 2, ow - 1), key="conv_col",
                   persist_state=KEEP)
    step = convlab.conv_step(ex.image, ex.kernel, ex.bias, row, col)
    name = t(f"classes.{data.classes[int(data.test_y[index])]}")
    f1, f2, f3 = st.columns(3)
    f1.plotly_chart(F.input_figure(hwc, ex, step, name, t), key="conv_input",
                    alt=t("a11y.conv_input_chart"))
    f2.plotly_chart(F.kernel_figure(ex.kernel, t), key="conv_kernel_fig",
                    alt=t("a11y.conv_kernel_chart"))
    f3.plotly_chart(F.fmap_figure(fmap, row, col, t), key="conv_fmap",
                    alt=t("a11y.conv_fmap_chart"))
    st.markdown(f"## {t('network.step_title', row=row, col=col)}")  # h2: under the page's h1
    st.plotly_chart(F.step_figure(step, t), key="conv_step_fig", alt=t("a11y.conv_step_chart"))
    st.markdown(t("network.step_sum", n=step["products"].size, sum=num(step["sum"], 4),
                  bias=num(step["bias"], 4), out=num(step["output"], 4)))
    (st.success if step["match"] else st.error)(t(
        "network.torch_agrees" if step["match"] else "network.torch_differs",
        value=num(step["torch_output"], 4)))


def pool(data) -> None:
    st.markdown(t("network.pool_intro"))
    ss = st.session_state   # the conv tab's choices, kept while it is closed
    _, _, fmap = conv_map(data, ss.get("conv_index", 0),
                          ss.get("conv_kernel", F.kernel_options()[0]))
    relu = np.maximum(fmap, 0)
    oh, ow = fmap.shape
    row, col = ss.get("conv_row", oh // 2), ss.get("conv_col", ow // 2)
    cols = st.columns(3)
    pk = cols[0].radio(t("network.kernel"), [2, 3], horizontal=True, key="pool_kernel",
                       persist_state=KEEP)
    ps = cols[1].radio(t("network.stride"), [1, 2, 3], index=1, horizontal=True,
                       key="pool_stride", persist_state=KEEP)
    # an 8×8 crop: its numbers stay readable (a whole map has hundreds of windows)
    top = cols[2].slider(t("network.crop_top"), 0, oh - 8, min(row, oh - 8), key="pool_top",
                         persist_state=KEEP)
    left = cols[2].slider(t("network.crop_left"), 0, ow - 8, min(col, ow - 8), key="pool_left",
                          persist_state=KEEP)
    region = relu[top:top + 8, left:left + 8]
    pooled = call_or_show(convlab.maxpool_windows, region, int(pk), int(ps))
    if pooled is None:
        return
    wins = pooled["windows"]
    pick = st.slider(t("network.pool_window"), 1, len(wins), 1, key="pool_pick",
                     persist_state=KEEP) - 1
    fig_in, fig_out = F.pool_figures(region, pooled, pick, int(pk), t)
    p1, p2 = st.columns(2)
    p1.plotly_chart(fig_in, key="pool_in_fig", alt=t("a11y.pool_in_chart"))
    p2.plotly_chart(fig_out, key="pool_out_fig", alt=t("a11y.pool_out_chart"))
    out, chosen = pooled["output"], wins[pick]
    sizes = convlab.calculator("pool", region.shape[0], int(pk), 0, int(ps))
    st.markdown(t("network.pool_size_line", h=region.shape[0], out=out.shape[0],
                  formula=sizes["formula"]))
    st.markdown(t("network.pool_window_line", n=pick + 1, r=chosen["argmax"][0],
                  c=chosen["argmax"][1], value=num(chosen["max"], 3)))
    (st.success if pooled["match"] else st.error)(t(
        "network.pool_torch_agrees" if pooled["match"] else "network.pool_torch_differs"))


def activations() -> None:
    lesson("activation")
    st.plotly_chart(F.activation_figure(t), key="act_fig", alt=t("a11y.act_chart"))


for tab, draw in ((tab_lesson, lambda: lesson("network")), (tab_arch, arch), (tab_calc, calc),
                  (tab_edit, edit), (tab_conv, lambda: conv(get_data())),
                  (tab_pool, lambda: pool(get_data())), (tab_act, activations)):
    if tab.open:
        with tab:
            draw()
