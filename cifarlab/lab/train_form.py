"""The Train form's one owner: each knob as its widget holds it ⇄ a ``TrainConfig``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from cifarlab import i18n
from cifarlab.core.config import (PRESETS, KnobField, Limits, TrainConfig, knobs,
                                  problems_by_field, same, validate)
from cifarlab.core.modelspec import is_int
from cifarlab.core.safe_text import code_text, md_escape
from cifarlab.errors import Problem

# The schema the Train page draws its knobs from (a test swaps in a subclass with a new field).
CONFIG: type[TrainConfig] = TrainConfig


def knob_fields(cls: type | None = None) -> tuple[KnobField, ...]:
    """The knobs the Train page shows, in the schema's order."""
    return tuple(f for f in knobs(cls or CONFIG) if f.knob.widget)


def preset_values(name: str) -> dict[str, Any]:
    """The knobs a preset sets (``core.config.PRESETS``: TrainConfig values)."""
    return PRESETS[name].knob_values(preset_only=True)


def knob_value(kind: str, value: Any) -> Any:
    """A widget's value as its knob's (a text that is no number stays, for its message)."""
    if kind == "float" and isinstance(value, str):
        parsed = i18n.parse_decimal(value)
        return value if parsed is None else parsed
    if kind == "int" and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def widget_value(kind: str, value: Any, lang: str) -> Any:
    """A knob's value as its widget holds it: decimals as text (a number box reads 0,01 as 1)."""
    if kind == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return i18n.number(float(value), lang)
    return value if isinstance(value, str) else knob_value(kind, value)


@dataclass(frozen=True)
class Widget:
    """One knob to draw, its texts in the form's language (``note``: a line under it)."""

    name: str
    kind: str
    label: str
    help: str
    disabled: bool = False
    options: tuple = ()
    option_labels: tuple = ()
    placeholder: str | None = None
    step: int = 1
    note: str | None = None
    problem: str | None = None
    advanced: bool = False    # drawn in the Advanced section, after Train


class TrainForm:
    """The Train form of one browser session (see the module's docstring)."""

    def __init__(self, lang: str = i18n.DEFAULT, limits: Limits | None = None,
                 n_train: int | None = None, cls: type[TrainConfig] | None = None):
        self.lang, self.limits, self.n_train = lang, limits or Limits(), n_train
        self.cls = cls or CONFIG
        self.fields = knob_fields(self.cls)
        self.names = tuple(f.name for f in self.fields)
        # the tutorial's own settings come first; the others wait in an Advanced section
        self.advanced = tuple(f.name for f in self.fields if not f.knob.tutorial)
        self._knobs = {f.name: f.knob for f in self.fields}
        self._kind = {name: k.kind for name, k in self._knobs.items()}
        self.hidden: tuple[str, ...] = ()       # knobs a link hid (the values still apply)
        self._raw: dict[str, Any] = {f.name: self._show(f.name, f.default) for f in self.fields}
        self.locks: dict[str, str] = {}         # knob -> why the class locked it
        self.pushed: dict[str, Any] = {}        # the class's values
        self.class_version: Any = None
        self.revision = 0                       # changes the form made itself: rewrite widgets
        self.apply_preset("tutorial")

    def _show(self, name: str, value: Any) -> Any:
        return widget_value(self._kind[name], value, self.lang)

    def shown(self, name: str) -> Any:
        return self._raw[name]

    def take(self, widget_values: Mapping[str, Any]) -> None:
        """What the widgets hold now (the student's edits: no rewrite of the widgets)."""
        self._set(widget_values, mine=False)

    def _settle(self) -> None:
        """A device gone from the server falls back to "auto"; CUDA graphs only on CUDA."""
        if "device" in self._raw and not self._present(self._raw["device"]):
            self._raw["device"] = "auto"
        if "cuda_graphs" in self._raw and not self.on_cuda():
            self._raw["cuda_graphs"] = False

    def values(self) -> dict[str, Any]:
        return {name: knob_value(self._kind[name], value) for name, value in self._raw.items()}

    def check(self, values: Mapping[str, Any]) -> dict[str, Problem]:
        """field -> its first problem (``core.config.validate`` with the server's limits)."""
        return problems_by_field(validate(values, limits=self.limits, n_train=self.n_train,
                                          cls=self.cls))

    def problems(self) -> dict[str, Problem]:
        return self.check(self.values())

    def config(self) -> TrainConfig | None:
        """The config these values make; None while a field has a problem."""
        return None if self.problems() else self.cls(**self.values())

    def _set(self, values: Mapping[str, Any], mine: bool = True) -> None:
        for name, value in values.items():
            if name in self._raw:
                self._raw[name] = self._show(name, value)
        self._settle()
        self.revision += mine

    def set_lang(self, lang: str) -> None:
        if lang == self.lang:
            return
        values, self.lang = self.values(), lang
        self._set({n: v for n, v in values.items() if self._kind[n] == "float"
                   and not isinstance(v, str)})

    def from_link(self, params: Mapping[str, str]) -> list[Problem]:
        """The knobs a link sets (``?lr=0.01&epochs=3``), fitted to the server's limits, and those
        its ``hide=momentum,seed`` hides; each bad value is left out and said, the rest apply."""
        bad, taken = [], {}
        for name in (n for n in self.names if n in params):
            text = str(params[name])[:40]
            try:
                value = self._knobs[name].parse(text)
                if self._kind[name] == "choice" and value not in self._knobs[name].choices:
                    raise ValueError(text)
            except ValueError:
                # shown in Markdown: a link's text comes from whoever wrote the link
                bad.append(Problem(name, "link.bad_value", {"knob": name,
                                                            "value": md_escape(text)}))
                continue
            taken[name] = (text, value)
        values = {n: v for n, (_, v) in taken.items()}
        fitted = self.fit(values)   # "all the images" may become the server's limit
        problems = self.check(self.values() | fitted)
        for name in [n for n in values if n in problems
                     or (values[n] is not None and values[n] != fitted[n])]:
            why = problems[name].text(self.lang) if name in problems else \
                self._limit_text(name)
            bad.append(Problem(name, "link.refused", {"knob": name,
                                                      "value": md_escape(taken[name][0]),
                                                      "why": why}))
            del values[name]
        self._set(self.fit(values))
        hide = [h.strip() for h in str(params.get("hide", "")).split(",") if h.strip()]
        self.hidden = tuple(h for h in hide if h in self.names)
        bad += [Problem("hide", "link.unknown_knob", {"knob": code_text(h[:40]),
                                                      "known": ", ".join(self.names)})
                for h in hide if h not in self.names]
        return bad

    def _limit_text(self, name: str) -> str:
        t, lim = i18n.translator(self.lang), self.limits
        if name == "epochs":
            return t("train.epochs_limit_help", n=lim.max_epochs)
        if name == "train_subset":
            return t("train.subset_limit_help", n=lim.max_train_images)
        if name == "num_workers":
            return t("errors.config.num_workers_limit", n=lim.max_num_workers)
        return t("errors.link.no_device", devices=", ".join(lim.devices or ()))

    def link(self) -> dict[str, str]:
        """The link's parameters: the knobs that differ from the tutorial's, the hidden ones."""
        ref, out = self.tutorial_values(), {}
        for name, value in self.values().items():
            if not same(value, ref[name]):
                out[name] = ("all" if value is None else str(value).lower()
                             if isinstance(value, bool) else str(value))
        return out | ({"hide": ",".join(self.hidden)} if self.hidden else {})

    def fit(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """``values`` inside the server's limits, a missing device "auto"."""
        out, lim = dict(values), self.limits
        for name, cap in (("epochs", lim.max_epochs), ("num_workers", lim.max_num_workers)):
            if cap is not None and is_int(out.get(name)):
                out[name] = min(out[name], cap)
        if "train_subset" in out and lim.max_train_images is not None:
            images = out["train_subset"] if out["train_subset"] is not None else self.n_train
            if images is not None and images > lim.max_train_images:
                out["train_subset"] = lim.max_train_images
        if "device" in out and not self._present(out["device"]):
            out["device"] = "auto"
        return out

    def apply_preset(self, preset: str | Mapping[str, Any]) -> tuple[str, ...]:
        """A preset (a name in ``PRESETS``, "class", or knob values) fitted to the limits, the
        class's locked knobs kept; returns the locked knobs it would have changed."""
        values = self.class_values() if preset == "class" else self.fit(
            preset_values(preset) if isinstance(preset, str) else dict(preset))
        locked = {k: self.pushed[k] for k in self.locks if k in self.pushed}
        kept = tuple(k for k, v in locked.items() if k in values and not same(values[k], v))
        self._set(values | locked)
        return kept

    def class_values(self) -> dict[str, Any]:
        """The class's values over the tutorial's ({} in no class)."""
        return {} if self.class_version is None else self.tutorial_values() | self.pushed

    def preset_name(self) -> str | None:
        """The preset (as fitted here) that every knob matches, the class's first, or None."""
        presets = {"class": self.class_values()} if self.class_version is not None else {}
        presets |= {name: self.fit(preset_values(name)) for name in PRESETS}
        values = self.values()
        return next((name for name, preset in presets.items()
                     if all(same(values.get(k), v) for k, v in preset.items())), None)

    def apply_class(self, preset: Mapping[str, Any] | None,
                    locks: Mapping[str, str] | None = None, version: Any = None) -> None:
        """The class's pushed values and locked knobs (knob -> the reason; ``preset`` None: no
        class), written once per ``version``: then the student may change the unlocked ones."""
        if preset is None:
            self.locks, self.pushed, self.class_version = {}, {}, None
            return
        self.locks, self.pushed = dict(locks or {}), dict(preset)
        if version != self.class_version:
            self.class_version = version
            self._set(self.pushed)

    def refused(self, field: str | None) -> str | None:
        """The server refused ``field``: a locked one gets the class's value back."""
        if field in self.locks and field in self.pushed:
            self._set({field: self.pushed[field]})
        return field if field in self._raw else None

    def tutorial_values(self) -> dict[str, Any]:
        """Each knob as the tutorial sets it, fitted to the server's limits."""
        return {f.name: f.default for f in self.fields} | self.fit(preset_values("tutorial"))

    def advanced_changed(self) -> tuple[str, ...]:
        """The Advanced knobs that differ from the tutorial's or have a problem (shown open)."""
        values, ref, problems = self.values(), self.tutorial_values(), self.problems()
        return tuple(n for n in self.advanced if n in problems or not same(values[n], ref[n]))

    def _present(self, device: Any) -> bool:
        return device == "auto" or self.limits.devices is None or device in self.limits.devices

    def on_cuda(self) -> bool:
        """The chosen device is a CUDA GPU ("auto" picks the first one when there is one)."""
        device = str(self._raw.get("device", "auto"))
        return device.startswith("cuda") or (device == "auto" and any(
            d.startswith("cuda") for d in self.limits.devices or ()))

    def widgets(self) -> list[Widget]:
        """The knobs to draw, in the schema's order (CUDA graphs only on a CUDA device)."""
        t, problems = i18n.translator(self.lang), self.problems()
        limited = {"epochs": self.limits.max_epochs, "train_subset": self.limits.max_train_images}
        out = []
        for f in self.fields:
            k, name = f.knob, f.name
            if name in self.hidden or (name == "cuda_graphs" and not self.on_cuda()):
                continue
            lock = self.locks.get(name)
            help_text = t(k.help) + (f" {lock}" if lock else "")
            options, labels, placeholder = (), (), None
            if limited.get(name) is not None:
                help_text += " " + self._limit_text(name)
            if name == "train_subset":
                images = [n for n in (self.n_train, self.limits.max_train_images) if n]
                placeholder = t("common.train_subset_all", n=min(images)) if images else None
            if k.kind == "device":
                options = ("auto", *(self.limits.devices or ()))
                labels = tuple(t("common.device_auto") if d == "auto" else d for d in options)
            elif k.kind == "choice":
                catalog = i18n.catalog(self.lang)
                options = k.choices
                labels = tuple(t(f"common.{name}_{v}") if f"common.{name}_{v}" in catalog
                               else str(v) for v in options)
            fast_workers = name == "num_workers" and self._raw.get("pipeline") == "fast"
            note = t("train.num_workers_fast") if fast_workers else None
            problem = problems.get(name)
            said = problem.text(self.lang) if problem else None
            typed = knob_value(k.kind, self._raw.get(name))
            if said and k.kind in ("int", "float") and isinstance(typed, str):
                said = t("errors.config.not_a_number", why=said)   # the box holds no number
            out.append(Widget(name, k.kind, t(k.label), help_text,
                              disabled=bool(lock) or note is not None, options=options,
                              option_labels=labels, placeholder=placeholder, step=int(k.step),
                              note=note, problem=said, advanced=name in self.advanced))
        return out
