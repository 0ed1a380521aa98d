"""A run's model card, the bundle's ``README.md``, in the student's language."""
from __future__ import annotations

import jinja2
from babel.lists import format_list

from cifarlab import i18n
from cifarlab.core.config import CIFAR10_CLASSES, TUTORIAL_SHORT_NAMES, knobs
from cifarlab.core.export.record import RunRecord
from cifarlab.core.export.render import TEMPLATES, TUTORIAL_URL
from cifarlab.core.safe_text import md_escape
from cifarlab.i18n import finite

# what the environment table shows, in this order: (key of core.devices.environment(), label)
ENV_ROWS = (("torch", "PyTorch"), ("torchvision", "torchvision"), ("python", "Python"),
            ("platform", "platform"), ("cpu", "CPU"), ("cpu_count", "CPU cores"),
            ("torch_threads", "torch threads"), ("device", "device"),
            ("device_name", "device name"), ("cuda", "CUDA"), ("cudnn", "cuDNN"))
_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=False,
                          undefined=jinja2.StrictUndefined, trim_blocks=True,
                          lstrip_blocks=True, keep_trailing_newline=True)


def model_card(record: RunRecord, lang: str = i18n.DEFAULT, notebook: str = "cifar_run.ipynb",
               logs: str = "runs") -> str:
    lang = i18n.normalize_lang(lang)
    c, res = record.config, record.results
    names = [_class_name(cls, lang) for cls in record.classes]
    training = None
    if None not in (finite(res.get("steps")), finite(res.get("train_seconds"))):
        training = i18n.t("bundle.card.training", lang, steps=int(res["steps"]),
                          seconds=float(res["train_seconds"]),
                          ips=float(res.get("images_per_second") or 0.0),
                          device=md_escape(res.get("device_name") or res.get("device")
                                           or c.device))
    per_class = [(_class_name(cls, lang) + (
        f" (`{TUTORIAL_SHORT_NAMES[CIFAR10_CLASSES.index(cls)]}`)"  # and the tutorial's name
        if cls in CIFAR10_CLASSES else ""), i18n.percent(value, lang))
        for cls, value in (res.get("per_class_accuracy") or {}).items()]
    epochs = [(md_escape(e.get("epoch")), i18n.number(finite(e.get("mean_loss")), lang, 4),
               i18n.percent(e.get("accuracy"), lang))
              for e in res.get("epochs") or [] if isinstance(e, dict)]
    env = record.env or {}
    return _ENV.get_template("card.md.j2").render(
        t=lambda key, **kw: i18n.t(f"bundle.card.{key}", lang, **kw),
        name=md_escape(record.label), date=record.date, url=TUTORIAL_URL, notebook=notebook,
        logs=logs, logs_key="file_logs" if record.step_losses() is not None
        else "file_logs_epochs",
        data_text=i18n.t("bundle.card.data_text", lang, n=len(names),
                         classes=format_list(names, locale=i18n.BABEL_LOCALES[lang]),
                         n_train=record.n_train, epochs=c.epochs, n_test=record.n_test),
        setting=i18n.t("bundle.setting", lang),
        settings=[(i18n.t(f.knob.label, lang), repr(getattr(c, f.name))) for f in knobs(type(c))]
        + [(i18n.t("bundle.network", lang), record.network)],
        accuracy=(i18n.t("bundle.card.accuracy", lang, acc=record.accuracy)
                  if record.accuracy is not None else i18n.t("bundle.card.no_accuracy", lang)),
        training=training, per_class=per_class, epochs=epochs,
        env=[(label, env[key]) for key, label in ENV_ROWS if env.get(key) not in (None, "")])


def _class_name(cls: str, lang: str) -> str:
    """A CIFAR-10 class as the app names it in ``lang``; another data set's class as it is."""
    return i18n.t(f"classes.{cls}", lang) if cls in CIFAR10_CLASSES else md_escape(cls)
