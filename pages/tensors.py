"""Tensors: ranks 0–4 from a real batch, where a tensor lives, what copying it costs."""
import os

import streamlit as st
import torch

from cifarlab.core import devices
from cifarlab.errors import CifarLabError
from cifarlab.lab import tensors as tensorlab
from ui.data import get_data
from ui.language import num, show_error, translator
from ui.nav import lesson
from ui.widgets import checked_number, measured

t = translator()

# Tests shrink the measurements with CIFARLAB_MEASURE_SECONDS (seconds per measurement).
BUDGET = float(os.environ.get("CIFARLAB_MEASURE_SECONDS", "1.0") or 1.0)

st.title(t("nav.tensors"))
lesson("tensors")
data = get_data()

st.header(t("tensors.explorer_title"))
c1, c2 = st.columns([3, 1])
rank = c1.radio(t("tensors.pick_rank"), [0, 1, 2, 3, 4], index=2, horizontal=True,
                format_func=lambda r: t(f"tensors.rank_{r}"), key="tensors_rank")
batch = checked_number(c2, t("tensors.batch_n"), 1, 16, 4, key="tensors_batch",
                       help=t("tensors.batch_n_help"))
# a bad box shows its message and no result; the sections below go on with the default
examples = tensorlab.rank_examples(data, batch=4 if batch is None else int(batch))
ex = examples[rank]
if batch is not None:
    st.markdown(f"**{t(f'tensors.rank_{rank}')}**: "
                + t(f"tensors.rank_{rank}_example", n=int(batch)))
    st.plotly_chart(tensorlab.rank_figure(ex, data.classes, t), key="tensors_rank_fig",
                    width="stretch" if rank != 0 else "content",
                    alt=t("a11y.rank_chart", rank=rank))
    st.code(f"{ex.code}.shape   # {torch.Size(ex.shape)}\n{ex.code}.dim()   # {ex.rank}")
    st.dataframe(tensorlab.ranks_table(examples, t), hide_index=True, key="tensors_rank_table")

st.header(t("tensors.device_title"))
device_ids = devices.device_ids()
target = st.selectbox(t("common.device"), device_ids, key="tensors_device",
                      help=t("common.device_help"))
try:
    images = torch.from_numpy(examples[4].values).to(target)
except (CifarLabError, RuntimeError) as err:
    show_error(err)
    st.stop()
n_bytes = images.numel() * images.element_size()
st.code(f"images = images.to(\"{target}\")\n"
        f"images.shape    # {images.shape}\n"
        f"images.dtype    # {images.dtype}\n"
        f"images.device   # {images.device}\n"
        f"images.numel() * images.element_size()   # {n_bytes}")   # as Python prints it
st.markdown(t("tensors.bytes_of", bytes=tensorlab.size_text(n_bytes, t.lang),
              numel=num(images.numel()), size=images.element_size()))
if len(device_ids) == 1:
    st.caption(t("tensors.only_cpu"))

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
res = measured("transfer", lambda: tensorlab.transfer_costs(
    tdev, total_mb=mb, chunks=int(pieces), repeats=3, max_seconds=BUDGET))
if res is not None:
    fig, table = tensorlab.transfer_figure(res, t)
    st.plotly_chart(fig, key="transfer_fig", alt=t("a11y.transfer_chart"))
    st.dataframe(table, hide_index=True, key="transfer_table")
    st.caption(t("tensors.transfer_caption"))

st.header(t("tensors.item_title"))
st.markdown(t("tensors.item_sync"))
c1, c2 = st.columns(2)
steps = checked_number(c1, t("tensors.item_steps"), 10, 2000, 200, step=10, key="item_steps",
                       help=t("tensors.item_steps_help"))
idev = c2.selectbox(t("common.device"), device_ids, index=len(device_ids) - 1, key="item_device")
item = measured("item", lambda: tensorlab.item_sync_cost(idev, steps=int(steps),
                                                          max_seconds=BUDGET),
                disabled=steps is None)
if item is not None:
    fig, table = tensorlab.item_figure(item, t)
    st.plotly_chart(fig, key="item_fig", alt=t("a11y.item_chart"))
    st.dataframe(table, hide_index=True, key="item_table")
    st.caption(t("tensors.item_cpu_note") if item["device"] == "cpu"
               else t("tensors.item_gpu_note"))
