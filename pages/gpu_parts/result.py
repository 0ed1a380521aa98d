"""The CPU vs GPU page's view of one result: the lab's figures and sentences."""
from __future__ import annotations

import streamlit as st

from cifarlab.lab.gpu import analysis, charts, report


def chart(fig, name: str, t) -> None:
    """A figure with its words: gpu_<name>_chart, a11y.<name>_chart and gpu.<name>_caption."""
    st.plotly_chart(fig, key=f"gpu_{name}_chart", alt=t(f"a11y.{name}_chart"))
    st.caption(t(f"gpu.{name}_caption"))


def show(res, recorded: list, t, measured: list = ()) -> None:
    """One result, whether the machine was busy first. ``measured``: this server's runs."""
    L = t.lang
    judged = analysis.assess(res, measured)
    where = report.provenance(res, L, judged)
    if where["busy"]:
        st.warning(where["busy"], icon=":material/warning:")
    if where["elsewhere"]:
        st.warning(f"**{where['label']}** — {t('gpu.recorded_elsewhere_body')}",
                   icon=":material/public:")
    else:
        st.success(where["label"], icon=":material/computer:")
    if where["check"]:
        st.caption(where["check"])
    with st.expander(t("gpu.hardware_title"), expanded=where["elsewhere"]):
        st.table(report.hardware_table(res, L).set_index(t("gpu.hw_item")))
    st.caption(t("gpu.timing_note"))

    st.markdown(f"### :material/star: {t('gpu.tutorial_title')}")
    lines = report.tutorial_lines(res, L, judged["busy"])
    if not lines:
        st.info(t("gpu.tut_missing"))
    for line in lines:
        st.markdown(line)

    measured = list(dict.fromkeys(r["pipeline"] for r in res.ok_rows()))
    if not measured:
        return
    pipe = st.radio(t("gpu.chart_pipeline"), measured, horizontal=True, key="gpu_chart_pipeline",
                    index=measured.index("fast") if "fast" in measured else 0,
                    format_func=lambda p: t(f"gpu.pipeline_{p}"))
    st.markdown(f"### {t('gpu.throughput_title')}")
    chart(charts.throughput_figure(res, pipe, t), "throughput", t)

    st.markdown(f"### {t('gpu.speedup_title')}")
    if any(r["device"] != "cpu" for r in res.ok_rows()):
        chart(charts.speedup_figure(res, pipe, t), "speedup", t)
        for line in report.crossover_lines(res, pipe, L, judged["busy"]):
            st.markdown("- " + line)
    else:
        st.info(t("gpu.no_speedup"))
        st.markdown(f"#### {t('gpu.would_add_title')}")
        for line in report.would_add_lines(recorded, L):
            st.markdown(line)

    st.markdown(f"### {t('gpu.graphs_title')}")
    st.markdown(t("gpu.graphs_body"))
    gains = report.graph_gain_lines(res, L)
    for line in gains:
        st.markdown("- " + line)
    if not gains:
        st.info(t("gpu.graphs_none"))   # (the page says above when this machine has no GPU)

    st.markdown(f"### {t('gpu.breakdown_title')}")
    if devs := charts.breakdown_devices(res):
        b1, b2 = st.columns(2)
        dev = b1.radio(t("gpu.device_col"), devs, horizontal=True, key="gpu_breakdown_device",
                       index=len(devs) - 1)
        scale = b2.radio(t("gpu.breakdown_scale"), ["ms", "share"], horizontal=True,
                         key="gpu_breakdown_scale", format_func=lambda s: t(f"gpu.breakdown_{s}"))
        chart(charts.breakdown_figure(res, dev, scale == "share", t), "breakdown", t)
    else:
        st.info(t("gpu.no_breakdown"))

    st.markdown(f"### {t('gpu.table_title')}")
    st.dataframe(report.rows_table(res.rows, L), hide_index=True, key="gpu_result_rows")

    st.markdown(f"### {t('gpu.save_title')}")
    stem = report.download_stem(res)
    d1, d2 = st.columns(2)
    d1.download_button(t("gpu.download_csv"), res.to_csv(), file_name=f"{stem}.csv",
                       mime="text/csv", key="gpu_download_csv", on_click="ignore")
    d2.download_button(t("gpu.download_json"), res.to_json(), file_name=f"{stem}.json",
                       mime="application/json", key="gpu_download_json", on_click="ignore")
