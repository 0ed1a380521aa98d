"""Home: the lab, the route through the lessons, this machine and data (last: they need torch)."""
import platform
from importlib.metadata import version

import numpy as np
import pandas as pd
import streamlit as st

from cifarlab.core import data as cdata
from cifarlab.lab.tables import class_name
from pages.classroom_parts import student as classroom_student
from ui.data import data_setting, get_data
from ui.language import language_switch, num, translator
from ui.nav import PAGES, lesson, url_state
from ui.signin import person

t = translator()


@st.cache_data(show_spinner=False, ttl=60, max_entries=2)
def _source_facts(source: str | None, cache: str | None) -> dict:
    # the arguments are only the cache key (see ui.data._load_data)
    return cdata.source_facts()


@st.cache_data(show_spinner=False, ttl=300, max_entries=1)
def _device_rows() -> list[dict]:
    from cifarlab.core import devices

    return [d.to_dict() for d in devices.list_devices()]


def _gb(n) -> str:
    return "—" if n is None else f"{num(n / 2**30, 1)} GB"


st.title(t("app.title"))
st.caption(t("app.tagline"))
language_switch("home_lang", compact=True)   # here too: a phone hides the sidebar
st.info(t("home.start_here"))
if not person().instructor:   # the class box: join one, or the banner
    classroom_student.join_box(t, classroom_student.student_view())

lesson("home")

st.subheader(t("home.route_title"))
for number, (pid, path, icon) in enumerate(PAGES[1:], start=1):
    left, right = st.columns([1, 3], vertical_alignment="center")
    left.page_link(path, label=f"{number}. {t(f'nav.{pid}')}", icon=icon, query_params=url_state())
    right.caption(t(f"home.route_{pid}"))

st.subheader(t("home.facts_title"))
loading = st.empty()   # what is loading, shown at once (the images have their own spinner)
loading.status(t("loading.tools"), state="running")
rows = _device_rows()
loading.empty()
import torch  # noqa: E402 - loaded by now (above): the facts name its exact build

from cifarlab.core.devices import cpu_count  # noqa: E402

st.metric(t("home.metric_cores"), cpu_count())   # the GPUs: the devices' table below
st.markdown("- " + t("home.fact_torch", torch=torch.__version__, torchvision=version("torchvision"))
            + " · " + t("home.fact_python", python=platform.python_version()))

st.markdown("**" + t("home.devices_title") + "**")
st.dataframe(pd.DataFrame([{
    t("home.device_id_col"): r["id"], t("home.device_kind_col"): r["kind"],
    t("home.device_name_col"): r["name"], t("home.device_memory_col"): _gb(r["memory_bytes"]),
} for r in rows]), hide_index=True)

st.markdown("**" + t("home.data_title") + "**")
facts = _source_facts(*data_setting())
size = num(facts["size_mb"], 1) if facts.get("size_mb") is not None else "?"
source = t(f"home.source.{facts['kind']}", name=facts.get("name") or "?", size=size)
if facts["kind"] != "missing":
    source += " " + t("home.source.cached" if facts["cached"] else "home.source.not_cached")
st.markdown(source)

# last: the first decode takes a while, and a failure stops the page after the facts above
data = get_data()
st.markdown("- " + t("home.fact_images", n_train=num(data.n_train), n_test=num(data.n_test)))
for note in data.notes:
    st.caption(note)
st.subheader(t("home.sample_title"))
_, first = np.unique(np.asarray(data.train_y), return_index=True)
idx = sorted(int(i) for i in first)[:12]
pics = data.train_x[idx].transpose(0, 2, 3, 1).repeat(3, axis=1).repeat(3, axis=2)  # sharp 3×
names = [class_name(data.classes[int(data.train_y[i])], t.lang) for i in idx]
st.image(list(pics), width=88, caption=names,
         alt=[t("a11y.train_image", cls=name) for name in names])
st.caption(t("app.footer"))
