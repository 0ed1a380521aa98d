"""Data: browse CIFAR-10 by class, what ToTensor and Normalize do to the numbers, a batch as the
tutorial's DataLoader delivers it, and how fast each pipeline can deliver batches (measured live,
on a button press)."""
import os

import numpy as np
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from cifarlab.core import data as cdata
from cifarlab.core import devices
from cifarlab.lab import data as loading
from cifarlab.errors import CifarLabError
from pages.common import checked_number, get_data, lesson, localize, num, show_error, translator

t = translator()

# Tests shrink the measurement with CIFARLAB_MEASURE_SECONDS (seconds per loader measured).
BUDGET = float(os.environ.get("CIFARLAB_MEASURE_SECONDS", "0.25") or 0.25)
CHANNEL_KEYS = ("data.channel_red", "data.channel_green", "data.channel_blue")
CHANNEL_COLOURS = ("#E45756", "#54A24B", "#4C78A8")
N_SAMPLE = 24


def _class_name(name: str) -> str:
    return t(f"classes.{name}") if name in cdata.CIFAR10_CLASSES else name


st.title(t("data.title"))
lesson("data")
data = get_data()
names = [_class_name(c) for c in data.classes]

# ------------------------------------------------------------------------------ the classes
st.header(t("data.classes_title"))
c1, c2 = st.columns(2)
c1.metric(t("data.split_train"), num(data.n_train))
c2.metric(t("data.split_test"), num(data.n_test))
st.caption(t("data.split_caption", n_train=num(data.n_train), n_test=num(data.n_test),
             pct=num(100 * data.n_test / max(1, data.n_train + data.n_test), 0)))

counts = loading.class_counts_table(data)
fig = go.Figure()
for split, colour in (("train", "#4C78A8"), ("test", "#F58518")):
    part = counts[counts["split"] == split]
    fig.add_trace(go.Bar(x=[names[i] for i in part["label"]], y=part["count"],
                         name=t(f"data.split_{split}"), marker_color=colour))
fig.update_layout(barmode="group", height=320, yaxis_title=t("data.images_per_class"),
                  margin=dict(l=10, r=10, t=30, b=10), legend=dict(orientation="h", y=1.12))
st.plotly_chart(localize(fig), key="data_counts_fig", alt=t("a11y.counts_chart"))

st.subheader(t("data.browse_title"))
c1, c2 = st.columns([2, 1], vertical_alignment="bottom")
cls = c1.selectbox(t("common.class"), list(range(data.num_classes)), index=3,
                   format_func=lambda i: names[i], key="data_class")
if c2.button(t("data.new_sample"), key="data_new_sample"):
    st.session_state["data_seed"] = st.session_state.get("data_seed", 0) + 1
seed = st.session_state.get("data_seed", 0)
indices, pictures = loading.class_sample(data, cls, n=N_SAMPLE, seed=seed)
st.image(list(loading.upscale(pictures, 3)), caption=[f"#{i}" for i in indices],
         alt=[t("a11y.train_image_n", i=int(i), cls=names[cls]) for i in indices])
st.caption(t("data.sample_caption", n=len(indices), cls=names[cls],
             total=num(int((data.train_y == cls).sum()))))

# ---------------------------------------------------------------------- ToTensor, Normalize
st.header(t("data.pixels_title"))
c1, c2 = st.columns([1, 3])
which = c1.radio(t("data.stats_on"), ["one", "sample"], key="data_stats_on",
                 format_func=lambda v: t(f"data.stats_{v}", n=len(indices)))
pick = checked_number(c1, t("data.pick_image"), 0, max(0, len(indices) - 1), 0, key="data_pick",
                      disabled=which != "one")
if pick is None and which == "one":
    pass                      # the box says what is wrong; no picture, no stale numbers
elif len(indices):
    pick = 0 if pick is None else pick
    chosen = pictures[int(pick)] if which == "one" else pictures
    c1.image(loading.upscale(pictures[int(pick)], 4),
             caption=f"{names[cls]} #{indices[int(pick)]}",
             alt=t("a11y.train_image_n", i=int(indices[int(pick)]), cls=names[cls]))
    stats = loading.transform_stats(chosen, bins=32)
    table = loading.ranges_table(stats)
    stage_names = {"raw": t("data.raw_pixels"), "to_tensor": t("data.after_to_tensor"),
                   "normalize": t("data.after_normalize")}
    table["stage"] = [stage_names[s] for s in table["stage"]]
    c2.dataframe(table.rename(columns={"stage": t("data.stage_col"), "min": "min", "max": "max",
                                       "mean": t("data.mean_col"), "dtype": t("common.dtype"),
                                       "shape": t("common.shape")}),
                 hide_index=True, width="stretch", key="data_ranges")
    hist = make_subplots(rows=1, cols=3, subplot_titles=[
        "uint8 · 0…255", "ToTensor() · 0…1", "Normalize(0.5, 0.5) · −1…1"],
        horizontal_spacing=0.06)
    for col, stage in enumerate(loading.STAGES, start=1):
        s = stats[stage]
        centres = (s["edges"][:-1] + s["edges"][1:]) / 2
        width = float(s["edges"][1] - s["edges"][0])
        for ch in range(3):
            hist.add_trace(go.Bar(x=centres, y=s["counts"][ch], width=width,
                                  name=t(CHANNEL_KEYS[ch]), marker_color=CHANNEL_COLOURS[ch],
                                  opacity=0.55, legendgroup=str(ch), showlegend=col == 1),
                           1, col)
        hist.update_xaxes(range=[s["low"], s["high"]], row=1, col=col)
    hist.update_layout(barmode="overlay", height=320, margin=dict(l=10, r=10, t=40, b=10),
                       yaxis_title=t("data.histogram"), legend=dict(orientation="h", y=-0.15))
    c2.plotly_chart(localize(hist), key="data_hist_fig", alt=t("a11y.hist_chart"))
    c2.caption(t("data.hist_caption"))

# ---------------------------------------------------------------------------- a batch
st.header(t("data.batch_title"))
c1, c2 = st.columns([1, 3])
batch_size = checked_number(c1, t("common.batch_size"), 1, 64, 4, key="data_batch_size",
                            help=t("common.batch_size_help"))
if c1.button(t("data.next_batch"), key="data_next_batch", disabled=batch_size is None):
    st.session_state["data_batch_seed"] = st.session_state.get("data_batch_seed", 0) + 1
batch = None
if batch_size is not None:
    try:
        batch = loading.loader_batch(data, int(batch_size),
                                     seed=st.session_state.get("data_batch_seed", 0))
    except CifarLabError as err:
        show_error(err)
if batch is not None:
    c2.code("images, labels = next(iter(trainloader))\n"
            f"images.shape   # {batch['shape_text']}\n"
            f"images.dtype   # {batch['dtype']}   min {batch['min']:.3f}, max {batch['max']:.3f}\n"
            f"labels         # tensor({batch['labels']})\n"
            f"len(trainloader)   # {batch['batches_per_epoch']}", language="python")
    batch_names = [_class_name(n) for n in batch["label_names"]]
    c2.image(loading.upscale((batch["grid"] * 255).round().astype(np.uint8), 3),
             caption=" · ".join(batch_names),
             alt=t("a11y.batch_image", n=len(batch_names), classes=", ".join(batch_names)))
    c2.caption(t("data.batch_caption"))

# ------------------------------------------------------------------------------ throughput
st.header(t("data.loader_title"))
st.markdown(t("data.loader_intro"))
c1, c2 = st.columns(2)
lbatch = checked_number(c1, t("common.batch_size"), 1, 256, 4, key="loader_batch_size")
workers = c2.multiselect(t("common.num_workers"), [0, 1, 2, 4], default=[0, 1, 2, 4],
                         key="loader_workers", help=t("common.num_workers_help"))
st.caption(t("data.loader_cores", n=devices.cpu_count()))
if st.button(t("common.measure"), key="loader_run", type="primary", disabled=lbatch is None):
    if not workers:
        st.warning(t("data.pick_workers"))
    else:
        bar = st.progress(0.0, text=t("common.measuring"))
        total = len(workers) + 1
        done = []

        def _tick(row: dict) -> None:
            done.append(row)
            bar.progress(min(1.0, len(done) / total), text=t("common.measuring"))

        try:
            st.session_state["loader_result"] = loading.sweep_loaders(
                data, batch_size=int(lbatch), workers=sorted(workers), max_batches=100_000,
                max_seconds=BUDGET, on_result=_tick)
        except (CifarLabError, RuntimeError, OSError) as err:
            show_error(err)
        bar.empty()
sweep = st.session_state.get("loader_result") if lbatch is not None else None
if sweep is not None and len(sweep):
    tut = sweep[sweep["pipeline"] == "tutorial"].sort_values("num_workers")
    fast = sweep[sweep["pipeline"] == "fast"]
    fig = go.Figure()
    if len(tut):
        fig.add_trace(go.Scatter(x=tut["num_workers"], y=tut["images_per_second"],
                                 mode="lines+markers+text", name=t("data.pipeline_tutorial"),
                                 text=[num(v, 0) for v in tut["images_per_second"]],
                                 textposition="top center", marker=dict(size=10)))
    xs = sorted(sweep["num_workers"].unique()) if len(tut) else [0]
    span = [xs[0], xs[-1]] if xs[-1] != xs[0] else [xs[0] - 0.5, xs[0] + 0.5]
    for row in fast.itertuples():     # the fast pipeline has no workers: a dashed level
        label = f"{t('data.pipeline_fast')}: {num(row.images_per_second, 0)}"
        fig.add_trace(go.Scatter(x=span, y=[row.images_per_second] * 2, mode="lines+text",
                                 line=dict(dash="dash", color="#54A24B"), name=label,
                                 text=[label, ""], textposition="top right"))
    low = float(sweep["images_per_second"].min())
    high = float(sweep["images_per_second"].max())
    fig.update_layout(height=380, xaxis_title="num_workers",
                      yaxis_title=t("common.images_per_second"), yaxis_type="log",
                      yaxis_range=[np.log10(low / 2), np.log10(high * 3)],
                      margin=dict(l=10, r=10, t=30, b=10),
                      xaxis=dict(tickmode="array", tickvals=sorted(sweep["num_workers"].unique())),
                      title=t("data.loader_fig_title", batch=int(sweep["batch_size"].iloc[0])))
    st.plotly_chart(localize(fig), key="loader_fig", alt=t("a11y.loader_chart"))
    for row in sweep.itertuples():
        st.markdown("- " + t("data.loader_result", pipeline=t(f"data.pipeline_{row.pipeline}"),
                             ips=num(row.images_per_second, 0), batch=row.batch_size,
                             workers=row.num_workers)
                    + " · " + t("data.loader_startup", s=num(row.startup_seconds, 2)))
    st.dataframe(sweep.round(3), hide_index=True, width="stretch", key="loader_table")
    st.caption(t("data.loader_caption"))
