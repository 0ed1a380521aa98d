"""Data: CIFAR-10 by class, ToTensor and Normalize, augmentation, a batch, loader speed."""
import os

import numpy as np
import streamlit as st

from cifarlab.core import devices
from cifarlab.lab import data as loading
from cifarlab.lab.tables import class_name
from ui.data import get_data
from ui.language import call_or_show, num, translator
from ui.nav import lesson
from ui.widgets import checked_number, measured

t = translator()

# Tests shrink the measurement with CIFARLAB_MEASURE_SECONDS (seconds per loader measured).
BUDGET = float(os.environ.get("CIFARLAB_MEASURE_SECONDS", "0.25") or 0.25)

st.title(t("data.title"))
lesson("data")
data = get_data()
names = loading.class_names(data, t)

st.header(t("data.classes_title"))
c1, c2 = st.columns(2)
c1.metric(t("data.split_train"), num(data.n_train))
c2.metric(t("data.split_test"), num(data.n_test))
st.caption(t("data.split_caption", n_train=num(data.n_train), n_test=num(data.n_test),
             pct=num(100 * data.n_test / max(1, data.n_train + data.n_test), 0)))
st.plotly_chart(loading.counts_figure(data, t), key="data_counts_fig", alt=t("a11y.counts_chart"))

st.subheader(t("data.browse_title"))
c1, c2 = st.columns([2, 1], vertical_alignment="bottom")
cls = c1.selectbox(t("common.class"), list(range(data.num_classes)), index=3,
                   format_func=lambda i: names[i], key="data_class")
if c2.button(t("data.new_sample"), key="data_new_sample"):
    st.session_state["data_seed"] = st.session_state.get("data_seed", 0) + 1
indices, pictures = loading.class_sample(data, cls, n=24, seed=st.session_state.get("data_seed", 0))
st.image(list(loading.upscale(pictures, 3)), caption=[f"#{i}" for i in indices],
         alt=[t("a11y.train_image_n", i=int(i), cls=names[cls]) for i in indices])
st.caption(t("data.sample_caption", n=len(indices), cls=names[cls],
             total=num(int((data.train_y == cls).sum()))))

st.header(t("data.pixels_title"))
c1, c2 = st.columns([1, 3])
pick = checked_number(c1, t("data.pick_image"), 0, max(0, len(indices) - 1), 0, key="data_pick")
if pick is not None and len(indices):   # a bad box: no stale numbers
    pick = int(pick)
    c1.image(loading.upscale(pictures[pick], 4), caption=f"{names[cls]} #{indices[pick]}",
             alt=t("a11y.train_image_n", i=int(indices[pick]), cls=names[cls]))
    stats = loading.transform_stats(pictures[pick], bins=32)
    c2.dataframe(loading.ranges_table(stats, t), hide_index=True, key="data_ranges")
    c2.plotly_chart(loading.histogram_figure(stats, t), key="data_hist_fig",
                    alt=t("a11y.hist_chart"))
    c2.caption(t("data.hist_caption"))

st.header(t("data_aug.title"))
st.markdown(t("data_aug.intro"))
c1, c2, c3 = st.columns([2, 1, 1], vertical_alignment="bottom")
kind = c1.radio(t("data_aug.kind"), loading.AUGMENT_KINDS, key="data_aug_kind", horizontal=True,
                format_func=lambda k: t(f"common.augment_{k}"))
epochs = checked_number(c2, t("data_aug.epochs"), 1, loading.MAX_AUGMENT_EPOCHS, 3,
                        key="data_aug_epochs")
if c3.button(t("data_aug.new_draw"), key="data_aug_new"):
    st.session_state["data_aug_seed"] = st.session_state.get("data_aug_seed", 0) + 1
if epochs is not None:
    shown = indices[:3]
    view = call_or_show(loading.augment_draws, data, shown, kind, epochs=int(epochs),
                        seed=st.session_state.get("data_aug_seed", 0))
    if view is not None:
        for i, index in enumerate(shown):
            texts = [t("data_aug.original")] + [loading.draw_text(view, k, i, t)
                                                 for k in range(int(epochs))]
            pictures_i = [view.original[i], *view.draws[:, i]]
            st.image(list(loading.upscale(np.stack(pictures_i), 3)), caption=texts,
                     alt=[t("data_aug.image_alt", i=int(index), cls=names[cls], what=w)
                          for w in texts])

st.header(t("data.batch_title"))
c1, c2 = st.columns([1, 3])
batch_size = checked_number(c1, t("common.batch_size"), 1, 64, 4, key="data_batch_size",
                            help=t("common.batch_size_help"))
if c1.button(t("data.next_batch"), key="data_next_batch", disabled=batch_size is None):
    st.session_state["data_batch_seed"] = st.session_state.get("data_batch_seed", 0) + 1
batch = None if batch_size is None else call_or_show(
    loading.loader_batch, data, int(batch_size), seed=st.session_state.get("data_batch_seed", 0))
if batch is not None:
    c2.code("images, labels = next(iter(trainloader))\n"
            f"images.shape   # {batch['shape_text']}\n"
            f"images.dtype   # {batch['dtype']}   min {num(float(batch['min']), 3)}, "
            f"max {num(float(batch['max']), 3)}\n"
            f"labels         # tensor({batch['labels']})\n"
            f"len(trainloader)   # {batch['batches_per_epoch']}")
    batch_names = [class_name(n, t.lang) for n in batch["label_names"]]
    c2.image(loading.upscale((batch["grid"] * 255).round().astype(np.uint8), 3),
             caption=" · ".join(batch_names),
             alt=t("a11y.batch_image", n=len(batch_names), classes=", ".join(batch_names)))
    c2.caption(t("data.batch_caption"))

st.header(t("data.loader_title"))
st.markdown(t("data.loader_intro"))
workers = st.multiselect(t("common.num_workers"), [0, 1, 2, 4], default=[0, 1, 2, 4],
                         key="loader_workers", help=t("common.num_workers_help"))
st.caption(t("data.loader_cores", n=devices.cpu_count()))
if not workers:
    st.warning(t("data.pick_workers"))
sweep = measured("loader", lambda: loading.sweep_loaders(   # the tutorial's batch of 4
    data, workers=sorted(workers), max_batches=100_000, max_seconds=BUDGET), disabled=not workers)
if sweep is not None and len(sweep):
    st.dataframe(loading.loader_table(sweep, t), hide_index=True, key="loader_table")
    st.caption(t("data.loader_caption"))
