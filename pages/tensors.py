"""Tensors: ranks 0–4 cut from a real CIFAR-10 batch, where a tensor lives, and what moving data
between devices costs (measured live, on a button press)."""
import os

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
import torch
from plotly.subplots import make_subplots

from cifarlab.core import data as cdata
from cifarlab.core import devices
from cifarlab.lab import tensors as tensorlab
from cifarlab.errors import CifarLabError
from pages.common import checked_number, get_data, lesson, localize, num, show_error, translator

t = translator()

# Tests shrink the measurements with CIFARLAB_MEASURE_SECONDS (seconds per measurement).
BUDGET = float(os.environ.get("CIFARLAB_MEASURE_SECONDS", "1.0") or 1.0)
CHANNELS = (("tensors.channel_red", "Reds"), ("tensors.channel_green", "Greens"),
            ("tensors.channel_blue", "Blues"))


def _class_name(name: str) -> str:
    return t(f"classes.{name}") if name in cdata.CIFAR10_CLASSES else name


def _size(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{num(n / scale, 1)} {unit}"
    return f"{int(n)} B"


def _heat(z: np.ndarray, colorscale: str = "RdBu_r", text: bool = False) -> go.Heatmap:
    return go.Heatmap(z=z, zmin=-1, zmax=1, colorscale=colorscale, showscale=False,
                      text=np.round(z, 2) if text else None,
                      texttemplate="%{text}" if text else None,
                      hovertemplate="row %{y}, col %{x}: %{z:.3f}<extra></extra>")


def _rank_figure(ex: tensorlab.RankExample, classes) -> go.Figure:
    if ex.rank == 0:
        fig = go.Figure(_heat(np.array([[float(ex.values)]]), text=True))
        fig.update_traces(textfont_size=28)
        fig.update_layout(height=180, width=220)
    elif ex.rank == 1:
        fig = go.Figure(_heat(ex.values[None, :], text=False))
        fig.update_layout(height=160)
        fig.update_yaxes(showticklabels=False)
        fig.update_xaxes(title_text=t("tensors.axis_column"))
    elif ex.rank == 2:
        fig = go.Figure(_heat(ex.values, "Reds"))
        fig.update_traces(zmin=-1, zmax=1)
        fig.update_layout(height=420, width=460)
        fig.update_yaxes(autorange="reversed", scaleanchor="x", title_text=t("tensors.axis_row"))
        fig.update_xaxes(title_text=t("tensors.axis_column"))
    elif ex.rank == 3:
        titles = [t("tensors.picture")] + [t(k) + f" [{i}]" for i, (k, _) in enumerate(CHANNELS)]
        fig = make_subplots(rows=1, cols=4, subplot_titles=titles, horizontal_spacing=0.03)
        fig.add_trace(go.Image(z=ex.pixels[0]), 1, 1)
        for i, (_, scale) in enumerate(CHANNELS):
            fig.add_trace(_heat(ex.values[i], scale), 1, i + 2)
        fig.update_yaxes(autorange="reversed", scaleanchor="x", showticklabels=False)
        fig.update_xaxes(showticklabels=False)
        fig.update_layout(height=300)
    else:
        n = len(ex.pixels)
        titles = [f"[{i}] {_class_name(classes[label])}" for i, label in enumerate(ex.labels)]
        fig = make_subplots(rows=1, cols=n, subplot_titles=titles, horizontal_spacing=0.01)
        for i in range(n):
            fig.add_trace(go.Image(z=ex.pixels[i]), 1, i + 1)
        fig.update_xaxes(showticklabels=False)
        fig.update_yaxes(showticklabels=False)
        fig.update_layout(height=max(140, int(1100 / max(n, 4))) + 40)
    fig.update_layout(margin=dict(l=10, r=10, t=40, b=10))
    return fig


st.title(t("nav.tensors"))
lesson("tensors")
data = get_data()

# ------------------------------------------------------------------------------ ranks 0 to 4
st.header(t("tensors.explorer_title"))
c1, c2, c3 = st.columns([3, 1, 1])
rank = c1.radio(t("tensors.pick_rank"), [0, 1, 2, 3, 4], index=2, horizontal=True,
                format_func=lambda r: t(f"tensors.rank_{r}"), key="tensors_rank")
batch = checked_number(c2, t("tensors.batch_n"), 1, 16, 4, key="tensors_batch",
                       help=t("tensors.batch_n_help"))
index = checked_number(c3, t("tensors.first_image"), 0, data.n_train - 1, 0, key="tensors_index",
                       help=t("tensors.first_image_help"))
ok = batch is not None and index is not None
# a bad box shows its message and no result; the sections below go on with the defaults
examples = tensorlab.rank_examples(data, index=int(index) if ok else 0,
                                   batch=int(batch) if ok else 4)
ex = examples[rank]
if ok:
    st.markdown(f"**{t(f'tensors.rank_{rank}')}**: "
                + t(f"tensors.rank_{rank}_example", n=int(batch)))
    st.plotly_chart(localize(_rank_figure(ex, data.classes)), key="tensors_rank_fig",
                    width="stretch" if rank != 0 else "content",
                    alt=t("a11y.rank_chart", rank=rank))
    shape_text = str(torch.Size(ex.shape))
    st.code(f"{ex.code}.shape   # {shape_text}\n{ex.code}.dim()   # {ex.rank}", language="python")
    st.dataframe(pd.DataFrame([{
        t("tensors.rank"): e.rank, t("common.shape"): str(tuple(e.shape)),
        t("tensors.in_pytorch"): e.code, t("tensors.numel"): num(e.numel),
        t("tensors.bytes"): _size(e.numel * 4),
    } for e in examples]), hide_index=True, width="stretch", key="tensors_rank_table")

# ---------------------------------------------------------------------------- where it lives
st.header(t("tensors.device_title"))
device_ids = devices.device_ids()
target = st.selectbox(t("common.device"), device_ids, key="tensors_device",
                      help=t("common.device_help"))
x = torch.from_numpy(examples[4].values)
try:
    moved = x.to(target)
    facts = tensorlab.tensor_facts(moved)
except (CifarLabError, RuntimeError) as err:
    show_error(err)
    st.stop()
st.code(f"images = images.to(\"{target}\")\n"
        f"images.shape    # {facts['shape_text']}\n"
        f"images.dtype    # {facts['dtype']}\n"
        f"images.device   # {facts['device']}\n"
        f"images.numel() * images.element_size()   # {facts['bytes']:,} bytes", language="python")
st.markdown(t("tensors.device_of", device=f"`{facts['device']}`") + " · "
            + t("tensors.bytes_of", bytes=_size(facts["bytes"]), numel=num(facts['numel']),
                size=facts["element_size"]))
if len(device_ids) == 1:
    st.caption(t("tensors.only_cpu"))

# ------------------------------------------------------------------------- copying costs
st.header(t("tensors.transfer_title"))
st.markdown(t("tensors.transfer_intro"))
has_cuda = any(d.startswith("cuda") for d in device_ids)
if not has_cuda:
    st.info(t("tensors.transfer_no_gpu") + "\n\n" + t("tensors.gpu_would_add"))
c1, c2, c3 = st.columns(3)
# Without a bus the fixed cost per copy is a few microseconds: smaller pieces show it.
mb = c1.select_slider(t("tensors.transfer_size"), options=[1, 4, 16, 64],
                      value=16 if has_cuda else 4, format_func=lambda v: f"{v} MB",
                      key="transfer_mb")
pieces = c2.select_slider(t("tensors.transfer_pieces"), options=[16, 256, 1024, 4096, 16384],
                          value=4096 if has_cuda else 16384, key="transfer_chunks")
tdev = c3.selectbox(t("common.device"), device_ids, index=len(device_ids) - 1,
                    key="transfer_device")
if st.button(t("common.measure"), key="transfer_run", type="primary"):
    with st.spinner(t("common.measuring")):
        try:
            st.session_state["transfer_result"] = tensorlab.transfer_costs(
                tdev, total_mb=mb, chunks=int(pieces), repeats=3, max_seconds=BUDGET)
        except (CifarLabError, RuntimeError) as err:
            show_error(err)
res = st.session_state.get("transfer_result")
if res is not None:
    names = {"one_big": t("tensors.transfer_one_big"),
             "many_small": t("tensors.transfer_many_small")}
    shown = res.assign(label=[f"{names[m]} ({mem})" for m, mem in zip(res["method"],
                                                                       res["memory"])])
    fig = go.Figure(go.Bar(x=shown["label"], y=shown["ms"],
                           marker_color=["#4C78A8" if m == "one_big" else "#F58518"
                                         for m in shown["method"]],
                           text=[f"{num(v, 2)} ms" for v in shown["ms"]], textposition="outside"))
    fig.update_layout(height=340, yaxis_title="ms", margin=dict(l=10, r=10, t=30, b=10),
                      title=f"{res['path'].iloc[0]} · {_size(res['total_bytes'].iloc[0])}")
    st.plotly_chart(localize(fig), key="transfer_fig", alt=t("a11y.transfer_chart"))
    for row in res.itertuples():
        st.markdown("- " + t("tensors.transfer_result", n=num(row.copies),
                             size=_size(row.bytes_per_copy), ms=num(row.ms, 2))
                    + f" ({names[row.method]}, {row.memory}) · "
                    + t("tensors.transfer_bandwidth", gbps=num(row.gb_per_s, 2))
                    + " · " + t("tensors.per_copy", us=num(row.us_per_copy, 2)))
    st.dataframe(res[["path", "memory", "method", "copies", "bytes_per_copy", "ms",
                      "us_per_copy", "gb_per_s", "repeats"]].round(3), hide_index=True,
                 width="stretch", key="transfer_table")
    st.caption(t("tensors.transfer_caption"))

# ---------------------------------------------------------------------------- .item() sync
st.header(t("tensors.item_title"))
st.markdown(t("tensors.item_sync"))
c1, c2 = st.columns(2)
steps = checked_number(c1, t("tensors.item_steps"), 10, 2000, 200, step=10, key="item_steps",
                       help=t("tensors.item_steps_help"))
idev = c2.selectbox(t("common.device"), device_ids, index=len(device_ids) - 1,
                    key="item_device")
if st.button(t("common.measure"), key="item_run", type="primary", disabled=steps is None):
    with st.spinner(t("common.measuring")):
        try:
            st.session_state["item_result"] = tensorlab.item_sync_cost(
                idev, steps=int(steps), max_seconds=BUDGET)
        except (CifarLabError, RuntimeError) as err:
            show_error(err)
item = st.session_state.get("item_result") if steps is not None else None
if item is not None:
    st.markdown(t("tensors.item_timing", with_item=num(item['with_item_s'] * 1e3, 1),
                  without_item=num(item['without_item_s'] * 1e3, 1)))
    labels = [t("tensors.item_every_step", n=item["item_calls_with"]),
              t("tensors.item_once", n=item["item_calls_without"])]
    fig = go.Figure(go.Bar(x=labels, y=[item["with_item_s"] * 1e3, item["without_item_s"] * 1e3],
                           marker_color=["#E45756", "#54A24B"],
                           text=[f"{num(item['with_item_ms_per_step'], 3)} ms/step",
                                 f"{num(item['without_item_ms_per_step'], 3)} ms/step"],
                           textposition="outside"))
    fig.update_layout(height=320, yaxis_title="ms", margin=dict(l=10, r=10, t=30, b=10),
                      title=f"{item['device']} · {item['steps']} steps")
    st.plotly_chart(localize(fig), key="item_fig", alt=t("a11y.item_chart"))
    st.dataframe(pd.DataFrame([{
        t("tensors.item_loop_col"): labels[0], t("tensors.item_calls_col"): item["item_calls_with"],
        "ms": round(item["with_item_s"] * 1e3, 3), t("tensors.item_sum_col"): item["total_with"],
    }, {
        t("tensors.item_loop_col"): labels[1],
        t("tensors.item_calls_col"): item["item_calls_without"],
        "ms": round(item["without_item_s"] * 1e3, 3),
        t("tensors.item_sum_col"): item["total_without"],
    }]), hide_index=True, width="stretch", key="item_table")
    st.caption(t("tensors.item_cpu_note") if item["device"] == "cpu"
               else t("tensors.item_gpu_note"))
