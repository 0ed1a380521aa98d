"""The code that repeats a run, from one template (``templates/run.py.j2``). No user text can
become code: the environment lets out only ``Code``, which only the filters below make."""
from __future__ import annotations

import ast
import dataclasses
import datetime as _dt
import keyword
import pprint
import re
import textwrap
from pathlib import Path
from typing import Any, Iterable

import jinja2

from cifarlab import i18n
from cifarlab.core.config import ACTIVATION_CODE, TrainConfig, knobs
from cifarlab.core.modelspec import layout
from cifarlab.core.safe_text import one_line
from cifarlab.core.shapes import trace_spec

TUTORIAL_URL = "https://pytorch.org/tutorials/beginner/blitz/cifar10_tutorial.html"
DEFAULT_NAME = "cifar_run.py"
_CELL = re.compile(r"^ *# %% (\w+)\n", re.M)
TEMPLATES = Path(__file__).with_name("templates")
_NOTHING = object()


class Code(str):
    """Text that may go into the code: made only by the filters below."""


def _defined(value: Any) -> Any:
    if isinstance(value, jinja2.Undefined):
        value._fail_with_undefined_error()
    return value


def py(value: Any, indent: int | None = None) -> Code:
    """``value`` as a Python literal; with ``indent``, wrapped to 95 columns for a line that
    starts ``indent`` characters in."""
    value = _defined(value)
    if indent is None:
        text = repr(value)
    else:
        text = pprint.pformat(value, width=95 - indent, sort_dicts=False)
        text = text.replace("\n", "\n" + " " * indent)
    try:
        back = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        back = _NOTHING
    if type(back) is not type(value) or back != value:
        raise TypeError(f"no Python literal for {type(value).__name__} {text[:60]}")
    return Code(text)


def comment(text: Any) -> Code:
    """``text`` on one line, for after a ``#``."""
    return Code(one_line(_defined(text)))


def ident(name: Any) -> Code:
    name = _defined(name)
    if not (isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)):
        raise TypeError(f"not a Python name: {name!r:.60}")
    return Code(name)


def _only_code(value: Any) -> Code:
    if type(value) is Code:
        return value
    raise TypeError(f"a template wrote {type(value).__name__} {str(value)[:60]!r} without a "
                    "filter: use |py, |comment or |ident")


_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=False,
                          undefined=jinja2.StrictUndefined, finalize=_only_code,
                          trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
_ENV.filters = {"py": py, "comment": comment, "ident": ident}


def constant_name(field_name: str) -> str:
    """The script's constant for a config field: the tutorial's name, else NAME.upper()."""
    return "LEARNING_RATE" if field_name == "lr" else field_name.upper()


def render(config: TrainConfig, notes: Iterable[str] = (), script_name: str = DEFAULT_NAME,
           notebook: dict | None = None, lang: str = i18n.DEFAULT) -> str:
    """The script (or, with ``notebook``'s values, the notebook's cells) for ``config``'s run;
    ShapeError if the network does not fit."""
    spec = config.model
    flat = next(t for t in trace_spec(spec) if t.kind == "flatten")  # first: any ShapeError
    modules, forward = layout(spec)   # what class Net is made of (core.model.Net's own)
    net = {"spec": spec, "modules": modules, "forward": forward, "hidden": spec.scaled_hidden(),
           "flat": flat.in_shape, "numbers": f"{flat.out_shape[0]:,}"}
    return _ENV.get_template("run.py.j2").render(
        c=config, net=net, act=Code(ACTIVATION_CODE[config.activation]), notes=list(notes),
        script=script_name, notebook=notebook,
        settings=settings(config, lang),
        settings_title=textwrap.wrap(i18n.t("bundle.code.settings", lang), 93),
        date=_dt.date.today().isoformat(), url=TUTORIAL_URL,
        describe=textwrap.wrap(f"{config.describe()}, " + (
            "the tutorial's network" if config.model.is_tutorial else "the network of MODEL"),
            88))


def export_script(config: TrainConfig, source_note: str | None = None,
                  script_name: str = DEFAULT_NAME, lang: str = i18n.DEFAULT) -> str:
    """The script that repeats ``config``'s run in the tutorial's plain PyTorch (never
    cifarlab), ``source_note``'s lines as comments at the top."""
    return render(config, notes=str(source_note or "").splitlines(), script_name=script_name,
                  lang=lang)


def split_cells(text: str) -> list[tuple[str, str]]:
    """The ``# %% name`` cells of rendered code, as (name, code), each dedented."""
    parts = _CELL.split(text)
    return [(name, textwrap.dedent(body).strip("\n")) for name, body in
            zip(parts[1::2], parts[2::2], strict=True)]


def settings(config: TrainConfig, lang: str = i18n.DEFAULT) -> list[dict]:
    """One constant per config field, under its knob's help in ``lang``."""
    def t(key: str, **kw) -> str:
        return i18n.t(f"bundle.code.{key}", lang, **kw)

    helps = {f.name: i18n.t(f.knob.help, lang) + (
        " " + t("one_of", choices=", ".join(map(repr, f.knob.choices)))
        if f.knob.choices else "") for f in knobs(type(config))}
    helps.setdefault("model", t("model"))
    out = []
    for f in dataclasses.fields(config):
        name, value = constant_name(f.name), getattr(config, f.name)
        if f.name == "val_fraction" and not value:   # the tutorial's script: no split to set
            continue
        value = value.to_dict() if hasattr(value, "to_dict") else value
        help_text = helps.get(f.name, "") + (" " + t(f.name) if f.name in ("activation",
                                                                           "val_fraction")
                                              else "")
        if f.name not in TrainConfig.__dataclass_fields__:  # a subclass's: written, not read
            help_text = (help_text + " " if help_text else "") + t("not_used")
        out.append({"name": name, "value": value, "indent": len(name) + 3,
                    "help": textwrap.wrap(help_text, 93)})
    return out

