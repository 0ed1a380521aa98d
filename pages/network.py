"""Network: the tutorial's Net layer by layer, an output-size calculator, an editable layer stack,
and convolution and max pooling worked out on a real CIFAR-10 image."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
from plotly.subplots import make_subplots
import streamlit as st

from cifarlab.lab import network as convlab
from cifarlab.core.config import ModelSpec
from cifarlab.errors import CifarLabError
from pages.common import get_data, lesson, show_error, translator, localize, num

t = translator()

st.title(t("nav.network"))
tab_lesson, tab_arch, tab_calc, tab_edit, tab_conv, tab_pool = st.tabs([
    t("lesson.title"), t("network.arch_title"), t("network.calc_title"), t("network.edit_title"),
    t("network.conv_title"), t("network.pool_title")])

KINDS = {"input": t("network.kind_input"), "conv": t("network.kind_conv"),
         "pool": t("network.kind_pool"), "relu": t("network.kind_relu"),
         "flatten": t("network.kind_flatten"), "linear": t("network.kind_linear")}


@st.cache_data(max_entries=32, show_spinner=False)
def stack_report(spec: ModelSpec) -> convlab.StackReport:
    return convlab.analyze_stack(spec)


def shape_table(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame({
        t("network.layer_col"): [r["layer"] for r in rows],
        t("network.kind_col"): [KINDS.get(r["kind"], r["kind"]) for r in rows],
        t("network.in_shape_col"): [r["input"] for r in rows],
        t("network.out_shape_col"): [r["output"] for r in rows],
        t("network.params_col"): [r["params"] for r in rows],
        t("network.formula_col"): [r["formula"] for r in rows],
    })


def show_table(rows: list[dict], key: str) -> None:
    st.dataframe(shape_table(rows), hide_index=True, width="stretch", key=key,
                 height=35 * (len(rows) + 1) + 3,
                 column_config={t("network.formula_col"): st.column_config.TextColumn(width="large")})


def heatmap(z, title: str, text: bool = False, colorscale: str = "RdBu", height: int = 300,
            reverse_y: bool = True) -> go.Figure:
    z = np.asarray(z, dtype=float)
    lim = float(np.abs(z).max()) or 1.0
    fig = go.Figure(go.Heatmap(
        z=z, colorscale=colorscale, zmid=0 if colorscale == "RdBu" else None,
        zmin=-lim if colorscale == "RdBu" else None, zmax=lim if colorscale == "RdBu" else None,
        texttemplate="%{z:.2f}" if text else None, showscale=False))
    fig.update_layout(title=title, height=height, margin=dict(l=10, r=10, t=40, b=10))
    fig.update_yaxes(autorange="reversed" if reverse_y else True, scaleanchor="x",
                     constrain="domain", **pixel_ticks(z.shape[0]))
    fig.update_xaxes(constrain="domain", **pixel_ticks(z.shape[1]))
    return fig


def pixel_ticks(n: int) -> dict:
    """Whole-number ticks for a grid of n pixels (plotly's own choice gives 0.5 steps on
    small grids: a pixel has no half)."""
    return dict(tickmode="linear", tick0=0, dtick=1 if n <= 10 else 5 if n <= 40 else 10)


def box(fig: go.Figure, top: int, left: int, h: int, w: int, color: str = "#ffd400",
        width: int = 3, dash: str | None = None, **kw) -> None:
    fig.add_shape(type="rect", x0=left - 0.5, x1=left + w - 0.5, y0=top - 0.5, y1=top + h - 0.5,
                  line=dict(color=color, width=width, dash=dash), **kw)


# ------------------------------------------------------------------------------------- lesson
with tab_lesson:
    lesson("network")

# ------------------------------------------------------------------------- (a) the tutorial's
with tab_arch:
    st.markdown(t("network.arch_intro"))
    tutorial = stack_report(ModelSpec())
    show_table(tutorial.rows, "arch_table")
    c, h, w = tutorial.flat_shape
    st.markdown(t("network.fc1_inputs", n=tutorial.flat, c=c, h=h, w=w) + " · "
                + t("network.total_params", n=num(tutorial.total_params)))
    sizes = convlab.activation_sizes(tutorial.rows)
    fig = px.bar(x=[n for n, _ in sizes], y=[v for _, v in sizes],
                 labels={"x": t("network.layer_col"), "y": t("network.values_col")},
                 text=[num(v) for _, v in sizes])
    fig.update_layout(title=t("network.sizes_chart"), height=340, margin=dict(l=10, r=10, t=40, b=10))
    st.plotly_chart(localize(fig), width="stretch", key="arch_chart",
                    alt=t("a11y.sizes_chart"))
    st.caption(t("network.sizes_caption"))

# ----------------------------------------------------------------------------- (b) calculator
with tab_calc:
    st.markdown(t("network.calc_intro"))
    kind = st.radio(t("network.layer_type"), ["conv", "pool"], horizontal=True, key="calc_kind",
                    format_func=lambda k: t("network.layer_conv") if k == "conv"
                    else t("network.layer_pool"))
    cols = st.columns(5)
    # No min/max of Streamlit's own: its range message is English and it keeps the old value,
    # so a stride of 0 would go on showing the last result. The engine says what is wrong.
    size = cols[0].number_input(t("network.input_size"), value=32, step=1, key="calc_size")
    kernel = cols[1].number_input(t("network.kernel"), value=5 if kind == "conv" else 2, step=1,
                                  key=f"calc_kernel_{kind}")
    padding = cols[2].number_input(t("network.padding"), value=0, step=1, key="calc_padding")
    stride = cols[3].number_input(t("network.stride"), value=1 if kind == "conv" else 2, step=1,
                                  key=f"calc_stride_{kind}")
    dilation = cols[4].number_input(t("network.dilation"), value=1, step=1, key="calc_dilation")
    res = convlab.calculator(kind, int(size), int(kernel), int(padding), int(stride), int(dilation))
    if res["shape_error"] is not None:
        st.error(res["shape_error"].text(t.lang))
    else:
        left, right = st.columns([1, 3])
        left.metric(t("network.result"), res["output"] if res["ok"] else "—")
        right.markdown(f"**{t('network.formula')}**")
        right.code(res["formula"], language=None)
        if not res["ok"]:
            st.error(t("network.too_small"))
        elif not res["exact"]:
            st.warning(t("network.not_exact") + " "
                       + t("network.remainder", r=res["remainder"], s=int(stride)))
        else:
            st.success(t("network.exact"))

# --------------------------------------------------------------------------- (c) edit the net
with tab_edit:
    st.markdown(t("network.edit_intro"))
    d = ModelSpec()
    values = {}
    cols = st.columns(2)
    for i, col in enumerate(cols):
        layer = f"conv{i + 1}"
        with col:
            st.markdown(f"**{layer}**")
            a, b = st.columns(2)
            values[f"c{i}"] = a.number_input(t("network.channels", layer=layer), 1, 256,
                                             d.channels[i], key=f"edit_c{i + 1}")
            values[f"k{i}"] = b.number_input(t("network.kernel"), 1, 31, d.kernels[i],
                                             key=f"edit_k{i + 1}")
            values[f"p{i}"] = a.number_input(t("network.padding"), 0, 15, d.paddings[i],
                                             key=f"edit_p{i + 1}")
            values[f"s{i}"] = b.number_input(t("network.stride"), 1, 8, d.strides[i],
                                             key=f"edit_s{i + 1}")
    a, b, c_ = st.columns(3)
    pool = a.number_input(t("network.pool_size"), 1, 8, d.pool, key="edit_pool",
                          help=t("network.pool_size_help"))
    h1 = b.number_input(t("network.hidden", layer="fc1"), 1, 4096, d.hidden[0], key="edit_h1")
    h2 = c_.number_input(t("network.hidden", layer="fc2"), 1, 4096, d.hidden[1], key="edit_h2")
    try:
        spec = ModelSpec(channels=(int(values["c0"]), int(values["c1"])),
                         kernels=(int(values["k0"]), int(values["k1"])),
                         paddings=(int(values["p0"]), int(values["p1"])),
                         strides=(int(values["s0"]), int(values["s1"])),
                         pool=int(pool), hidden=(int(h1), int(h2)))
        report = stack_report(spec)
    except CifarLabError as err:
        show_error(err)
    else:
        if report.ok:
            c, h, w = report.flat_shape
            box_ = st.success if report.flat == convlab.TUTORIAL_FLAT else st.info
            box_(t("network.fc1_inputs", n=report.flat, c=c, h=h, w=w) + " · "
                 + t("network.total_params", n=num(report.total_params)))
            show_table(report.rows, "edit_table")
        else:
            st.error(f"**{t('network.shape_error_title')}** — {report.error_text(t.lang)}")
        if report.view_error or report.flatten_error:
            st.markdown(t("network.hardcoded_intro"))
            st.markdown(t("network.with_view"))
            st.code(f"{report.view_error_kind}: {report.view_error}", language=None)
            st.markdown(t("network.with_flatten"))
            st.code(f"{report.flatten_error_kind}: {report.flatten_error}", language=None)
            if report.ok:
                st.markdown(t("network.hardcoded_fix", c=c, h=h, w=w, n=report.flat,
                              hidden=int(h1)))
        elif report.ok:
            st.markdown(t("network.hardcoded_ok"))

# --------------------------------------------------------------------- (d) convolution, by hand
data = get_data()
classes = data.classes
n_test = data.n_test

with tab_conv:
    st.markdown(t("network.conv_intro"))
    cols = st.columns([1, 2, 1])
    index = int(cols[0].number_input(t("network.image_index", n=n_test - 1), 0, n_test - 1, 0,
                                     key="conv_index"))
    named = convlab.named_kernels()
    options = list(named) + [f"net{i}" for i in range(6)]

    def kernel_label(name: str) -> str:
        if name.startswith("net"):
            return t("network.kernel_net", n=int(name[3:]) + 1)
        return t(f"network.kernel_{name}")

    choice = cols[1].selectbox(t("network.kernel_choice"), options, key="conv_kernel",
                               format_func=kernel_label)
    seed = int(cols[2].number_input(t("common.seed"), 0, 10_000, 0, key="conv_seed",
                                    help=t("network.seed_help")))
    label = classes[int(data.test_y[index])]
    hwc = data.image("test", index)
    if choice.startswith("net"):
        weights, biases = convlab.net_conv1(seed)
        kernel = weights[int(choice[3:])]
        bias = float(biases[int(choice[3:])])
        image = convlab.to_input(hwc, "rgb")
        st.caption(t("network.net_kernel_caption"))
    else:
        kernel, bias = named[choice], 0.0
        image = convlab.to_input(hwc, "gray")
        st.caption(t("network.gray_caption"))
    fmap = convlab.apply_kernel(image, kernel, bias)
    oh, ow = fmap.shape
    kh = kernel.shape[-1]
    a, b = st.columns(2)
    row = a.slider(t("network.out_row"), 0, oh - 1, min(oh // 2, oh - 1), key="conv_row")
    col = b.slider(t("network.out_col"), 0, ow - 1, min(ow // 2, ow - 1), key="conv_col")
    step = convlab.conv_step(image, kernel, bias, row, col)

    f1, f2, f3 = st.columns(3)
    fig = px.imshow(hwc) if image.shape[0] == 3 else px.imshow(
        image[0], color_continuous_scale="gray", zmin=0, zmax=1)
    fig.update_coloraxes(showscale=False)
    fig.update_xaxes(**pixel_ticks(hwc.shape[1]))
    fig.update_yaxes(**pixel_ticks(hwc.shape[0]))
    fig.update_layout(title=t("network.input_title", name=t(f"classes.{label}")), height=330,
                      margin=dict(l=10, r=10, t=40, b=10))
    box(fig, step["top"], step["left"], kh, kh)
    f1.plotly_chart(localize(fig), width="stretch", key="conv_input",
                    alt=t("a11y.conv_input_chart"))
    kfig = heatmap(kernel.mean(axis=0) if kernel.ndim == 3 else kernel,
                   t("network.kernel_title_mean") if kernel.ndim == 3 else t("network.kernel_title"),
                   text=kh <= 5, height=330)
    f2.plotly_chart(localize(kfig), width="stretch", key="conv_kernel_fig",
                    alt=t("a11y.conv_kernel_chart"))
    ffig = heatmap(fmap, t("network.fmap_title", h=oh, w=ow), height=330)
    box(ffig, row, col, 1, 1, color="#111111")
    f3.plotly_chart(localize(ffig), width="stretch", key="conv_fmap",
                    alt=t("a11y.conv_fmap_chart"))

    st.markdown(f"## {t('network.step_title', row=row, col=col)}")  # h2: under the page's h1
    win, ker, prod = step["window"], step["kernel"], step["products"]
    n_ch = win.shape[0]
    titles = []
    for ch in range(n_ch):
        name = t("network.channel_name", c="RGB"[ch]) if n_ch == 3 else ""
        titles += [f"{t('network.window')} {name}", f"{t('network.kernel_word')} {name}",
                   f"{t('network.products')} {name}"]
    sfig = make_subplots(rows=n_ch, cols=3, subplot_titles=titles, horizontal_spacing=0.05,
                         vertical_spacing=0.08)
    for ch in range(n_ch):
        for j, z in enumerate((win[ch], ker[ch], prod[ch])):
            sfig.add_trace(go.Heatmap(z=z, colorscale="RdBu", zmid=0, texttemplate="%{z:.2f}",
                                      showscale=False), row=ch + 1, col=j + 1)
    sfig.update_yaxes(autorange="reversed", **pixel_ticks(kh))
    sfig.update_xaxes(**pixel_ticks(kh))
    sfig.update_layout(height=260 * n_ch, margin=dict(l=10, r=10, t=40, b=10))
    st.plotly_chart(localize(sfig), width="stretch", key="conv_step_fig",
                    alt=t("a11y.conv_step_chart"))
    st.markdown(t("network.step_sum", n=prod.size, sum=num(step['sum'], 4),
                  bias=num(step['bias'], 4), out=num(step['output'], 4)))
    if step["match"]:
        st.success(t("network.torch_agrees", value=num(step['torch_output'], 4)))
    else:
        st.error(t("network.torch_differs", value=num(step['torch_output'], 4)))

# -------------------------------------------------------------------------- (e) max pooling
with tab_pool:
    st.markdown(t("network.pool_intro"))
    relu = np.maximum(fmap, 0)
    cols = st.columns(4)
    source = cols[0].radio(t("network.pool_source"), ["crop", "full"], key="pool_source",
                           format_func=lambda s: t(f"network.pool_source_{s}"))
    pk = cols[1].radio(t("network.kernel"), [2, 3], horizontal=True, key="pool_kernel")
    ps = cols[2].radio(t("network.stride"), [1, 2, 3], index=1, horizontal=True, key="pool_stride")
    if source == "crop":
        top = cols[3].slider(t("network.crop_top"), 0, oh - 8, min(row, oh - 8), key="pool_top")
        left = cols[3].slider(t("network.crop_left"), 0, ow - 8, min(col, ow - 8), key="pool_left")
        region = relu[top:top + 8, left:left + 8]
    else:
        region = relu
    try:
        pooled = convlab.maxpool_windows(region, int(pk), int(ps))
    except CifarLabError as err:
        show_error(err)
    else:
        wins = pooled["windows"]
        pick = st.slider(t("network.pool_window"), 1, len(wins), 1, key="pool_pick") - 1
        small = region.shape[0] <= 8
        p1, p2 = st.columns(2)
        ifig = heatmap(region, t("network.pool_in_title", h=region.shape[0], w=region.shape[1]),
                       text=small, colorscale="Viridis", height=420)
        if small:
            for wdw in wins:
                box(ifig, wdw["top"], wdw["left"], pk, pk, color="white", width=1, dash="dot")
        chosen = wins[pick]
        box(ifig, chosen["top"], chosen["left"], pk, pk, color="#ff4b4b", width=4)
        # the max's marker sits in its cell's corner, so the number in the cell stays readable
        off = 0.3 if small else 0.0
        ifig.add_trace(go.Scatter(x=[w_["argmax"][1] + off for w_ in wins],
                                  y=[w_["argmax"][0] - off for w_ in wins], mode="markers",
                                  marker=dict(symbol="star", size=11 if small else 7,
                                              color="#ff4b4b", line=dict(width=1, color="white")),
                                  name=t("network.pool_max_marker"), showlegend=False))
        p1.plotly_chart(localize(ifig), width="stretch", key="pool_in_fig",
                        alt=t("a11y.pool_in_chart"))
        out = pooled["output"]
        ofig = heatmap(out, t("network.pool_out_title", h=out.shape[0], w=out.shape[1]),
                       text=out.shape[0] <= 8, colorscale="Viridis", height=420)
        box(ofig, chosen["row"], chosen["col"], 1, 1, color="#ff4b4b", width=4)
        p2.plotly_chart(localize(ofig), width="stretch", key="pool_out_fig",
                        alt=t("a11y.pool_out_chart"))
        calc = convlab.calculator("pool", region.shape[0], int(pk), 0, int(ps))
        st.markdown(t("network.pool_size_line", h=region.shape[0], out=out.shape[0],
                      formula=calc["formula"]))
        st.markdown(t("network.pool_window_line", n=pick + 1, r=chosen["argmax"][0],
                      c=chosen["argmax"][1], value=num(chosen['max'], 3)))
        if pooled["match"]:
            st.success(t("network.pool_torch_agrees"))
        else:
            st.error(t("network.pool_torch_differs"))
