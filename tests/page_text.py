"""Everything a student reads on a page run by AppTest, as text: markdown, captions, alerts,
metrics (label, value, delta), widget labels and the options of select boxes and radios, image
captions, tab and expander labels, table cells as the browser shows them (a pandas Styler's
display values where the page formatted them, else the raw values, which the browser writes
in English) and the texts of plotly figures (titles, bar and cell texts, hover templates,
annotations, tick texts) with the figure's ``layout.separators``. Code (``st.code`` and Markdown
code spans) is left out: code is the same in every language.

    texts = page_texts(at)            # [(where, text), ...]
    figures = page_figures(at)        # [figure JSON, ...]
    open_tab(at, label)               # a keyed tab bar draws only its open tab
    for label in each_tab(at): ...    # every tab of it in turn
"""
from __future__ import annotations

import json
import re
from typing import Any, Iterator

import numpy as np
from google.protobuf.json_format import MessageToDict
from streamlit import dataframe_util

CODE = re.compile(r"```.*?```|`[^`]*`", re.S)
TEXT_KEYS = {"body", "label", "help", "delta", "options", "caption", "placeholder", "text",
             "title", "value", "alt"}
SKIP_TYPES = {"code", "plotly_chart", "dataframe", "arrow_data_frame", "table", "image"}
# the plotly keys a person reads; colours, modes, symbols and the rest are not words
FIGURE_KEYS = {"text", "texttemplate", "hovertemplate", "name", "ticktext", "customdata"}


def _nodes(at) -> Iterator[Any]:
    yield from at._tree


def _strings(value: Any, keys: set[str], key: str | None = None) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, keys, k)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v, keys, key)
    elif isinstance(value, str) and key in keys:
        yield value


def _figure_strings(fig: dict) -> Iterator[str]:
    """What a figure writes out: titles, names, texts, hover templates, annotations, tick
    texts; and numbers it was given as ``text`` or ``customdata`` where a template shows them
    as they are (plotly writes an unformatted number plainly, "0.1234", in every language;
    a formatted one, ``%{customdata:.3f}``, with the layout's ``separators``)."""
    for trace in fig.get("data", []):
        yield from _strings_in(trace)
        templates = " ".join(str(trace.get(k, "")) for k in ("hovertemplate", "texttemplate"))
        for key in ("text", "customdata"):
            plain = re.search(rf"%{{{key}(\[\d+\])?}}", templates) or (
                key == "text" and not trace.get("texttemplate"))
            if plain and key in trace:   # each number once: a mosaic's hover has thousands
                yield from dict.fromkeys(_numbers(trace[key]))
    yield from _strings_in(fig.get("layout", {}))


def _strings_in(value: Any, key: str | None = None, parent: str | None = None) -> Iterator[str]:
    if isinstance(value, dict):
        if "bdata" in value:          # plotly's typed arrays hold numbers, not words
            return
        for k, v in value.items():
            yield from _strings_in(v, k, key)
    elif isinstance(value, list):
        for v in value:
            yield from _strings_in(v, key, parent)
    elif isinstance(value, str) and (key in FIGURE_KEYS or parent == "title"):
        yield value


def _numbers(value: Any) -> Iterator[str]:
    """Numbers in a plotly array (a list, nested lists, or a typed ``bdata`` array)."""
    if isinstance(value, dict) and "bdata" in value and "dtype" in value:
        import base64

        arr = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        yield from (_plain(v) for v in arr.tolist())
    elif isinstance(value, list):
        for v in value:
            yield from _numbers(v)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield _plain(value)


def _plain(v: Any) -> str:
    """How a browser writes a number nobody formatted: 48120, 0.1234, NaN."""
    if isinstance(v, float):
        if v != v:
            return "NaN"
        return repr(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)
    return str(v)


def _table(proto) -> list[str]:
    data = proto.arrow_data
    raw = data.data or (proto.lazy_data.initial_chunk.data if proto.HasField("lazy_data")
                        else b"")
    df = dataframe_util.convert_arrow_bytes_to_pandas_df(raw)
    styled = (dataframe_util.convert_arrow_bytes_to_pandas_df(data.styler.display_values)
              if data.HasField("styler") and data.styler.display_values else None)
    out = [str(c) for c in df.columns] + [str(i) for i in df.index if not isinstance(i, int)]
    for r in range(len(df)):
        for c in range(len(df.columns)):
            if styled is not None:
                shown = styled.iat[r, c]
                if isinstance(shown, str) and shown != "":
                    out.append(shown)
                    continue
            value = df.iat[r, c]
            if value is None:
                out.append("None")        # the browser writes None as "None" (grey)
            elif isinstance(value, (float, np.floating)):
                out.append(_plain(float(value)))
            else:
                out.append(str(value))
    return out


def tab_bars(at) -> dict[str, list[str]]:
    """The page's keyed tab bars, key: labels. Such a bar (``st.tabs(key=..., on_change="rerun")``)
    runs only its open tab's code; the key ends the block's id (``$$ID-<hash>-<key>``)."""
    return {node.proto.id.split("-", 2)[-1]: [tab.label for tab in node.children.values()]
            for node in at._tree
            if getattr(node, "type", "") == "tab_container" and node.proto.id.startswith("$$ID-")}


def open_tab(at, label: str) -> None:
    """Choose the tab ``label`` (in the page's language) of its keyed bar, and rerun."""
    (key,) = [k for k, labels in tab_bars(at).items() if label in labels]
    at.session_state[key] = label
    at.run()
    assert not at.exception, [e.value for e in at.exception]


def each_tab(at) -> Iterator[str]:
    """Open every tab of the page's one keyed tab bar in turn; yields each label once its tab
    is drawn."""
    ((key, labels),) = tab_bars(at).items()
    for label in labels:
        open_tab(at, label)
        yield label


def page_figures(at) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def page_texts(at) -> list[tuple[str, str]]:
    """(element type, text) for everything a student reads on the page (code left out)."""
    out: list[tuple[str, str]] = []
    for node in _nodes(at):
        proto, kind = getattr(node, "proto", None), getattr(node, "type", "")
        if proto is None:
            continue
        if kind in ("dataframe", "arrow_data_frame", "table", "arrow_table"):
            out += [(kind, s) for s in _table(proto)]
            continue
        if kind == "plotly_chart":
            fig = json.loads(proto.spec)
            out += [(kind, s) for s in _figure_strings(fig)]
            continue
        if kind == "code":
            continue
        if kind == "html" and getattr(proto, "body", "").lstrip().startswith(("<style", "<script")):
            continue                  # the page's CSS: nobody reads it
        try:
            data = MessageToDict(proto, preserving_proto_field_name=True)
        except Exception:   # noqa: BLE001 - a block without a message of its own
            continue
        if kind == "image":
            out += [(kind, img.get("caption", "")) for img in data.get("imgs", [])]
            continue
        for s in _strings(data, TEXT_KEYS):
            out.append((kind, CODE.sub(" ", s)))
    return out


def joined(at) -> str:
    return "\n".join(s for _, s in page_texts(at))
