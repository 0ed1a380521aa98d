"""A run's model card, the bundle's ``README.md``, in the student's language."""
from __future__ import annotations


from babel.lists import format_list

from cifarlab import i18n
from cifarlab.core.config import CIFAR10_CLASSES, TUTORIAL_SHORT_NAMES, knobs
from cifarlab.core.export.record import RunRecord
from cifarlab.i18n import finite
from cifarlab.core.export.render import TUTORIAL_URL
from cifarlab.core.safe_text import md_escape

# what the environment table shows, in this order: (key of core.devices.environment(), label)
ENV_ROWS = (("torch", "PyTorch"), ("torchvision", "torchvision"), ("python", "Python"),
            ("platform", "platform"), ("cpu", "CPU"), ("cpu_count", "CPU cores"),
            ("torch_threads", "torch threads"), ("device", "device"),
            ("device_name", "device name"), ("cuda", "CUDA"), ("cudnn", "cuDNN"))


def model_card(record: RunRecord, lang: str = i18n.DEFAULT, notebook: str = "cifar_run.ipynb",
               logs: str = "runs") -> str:
    lang = i18n.normalize_lang(lang)

    def t(key: str, **kw) -> str:
        return i18n.t(f"bundle.card.{key}", lang, **kw)

    c = record.config
    res = record.results
    out = [t("title", name=md_escape(record.label)), "",
           t("summary", date=record.date, url=TUTORIAL_URL), ""]

    out += [t("files_title"), ""]
    logs_key = "file_logs" if record.step_losses() is not None else "file_logs_epochs"
    out += [f"- {t('file_notebook', notebook=notebook)}", f"- {t('file_weights')}",
            f"- {t(logs_key, logs=logs)}", f"- {t('file_card')}", ""]

    names = [_class_name(cls, lang) for cls in record.classes]
    out += [t("data_title"), "", t("data_text", n=len(names),
                                      classes=format_list(names, locale=i18n.BABEL_LOCALES[lang]),
                                      n_train=record.n_train, epochs=c.epochs,
                                      n_test=record.n_test), ""]

    out += [t("settings_title"), "", f"| {i18n.t('bundle.setting', lang)} | |", "|---|---|"]
    for f in knobs(type(c)):
        out.append(f"| {i18n.t(f.knob.label, lang)} | `{getattr(c, f.name)!r}` |")
    out += [f"| {i18n.t('bundle.network', lang)} | `{record.network}` |", ""]

    out += [t("results_title"), ""]
    acc = record.accuracy
    out += [t("accuracy", acc=acc) if acc is not None else t("no_accuracy"), ""]
    if None not in (finite(res.get("steps")), finite(res.get("train_seconds"))):
        device = md_escape(res.get("device_name") or res.get("device") or c.device)
        out += [t("training", steps=int(res["steps"]), seconds=float(res["train_seconds"]),
                  ips=float(res.get("images_per_second") or 0.0), device=device), ""]
    per_class = res.get("per_class_accuracy") or {}
    if per_class:
        out += [f"| {t('class_col')} | {t('accuracy_col')} |", "|---|---:|"]
        for cls, value in per_class.items():
            if cls in CIFAR10_CLASSES:   # its name in the language, and the tutorial's
                shown = (f"{_class_name(cls, lang)} "
                         f"(`{TUTORIAL_SHORT_NAMES[CIFAR10_CLASSES.index(cls)]}`)")
            else:
                shown = _class_name(cls, lang)
            out.append(f"| {shown} | {i18n.percent(value, lang)} |")
        out.append("")
    epochs = [e for e in res.get("epochs") or [] if isinstance(e, dict)]
    if epochs:
        out += [f"| {t('epoch_col')} | {t('loss_col')} | {t('accuracy_col')} |",
                "|---:|---:|---:|"]
        for e in epochs:
            loss = e.get("mean_loss")
            out.append(f"| {md_escape(e.get('epoch'))} | "
                       f"{i18n.number(finite(loss), lang, 4)} | "
                       f"{i18n.percent(e.get('accuracy'), lang)} |")
        out.append("")

    out += [t("env_title"), ""]
    env = record.env or {}
    rows = [(label, env.get(key)) for key, label in ENV_ROWS if env.get(key) not in (None, "")]
    if rows:
        out += ["| | |", "|---|---|"] + [f"| {label} | `{value}` |" for label, value in rows]
    else:
        out.append(t("env_missing"))
    out += ["", t("limits_title"), "", t("limits"), ""]

    out += [t("use_title"), "", t("use_weights"), "", "```python", "import torch", "",
            "net = Net()  # class Net: in the notebook",
            "net.load_state_dict(torch.load('cifar_net.pth', weights_only=True))", "```", "",
            t("use_logs"), "", "```bash", f"tensorboard --logdir {logs}", "```", ""]
    return "\n".join(out)


def _class_name(cls: str, lang: str) -> str:
    """A class as the app names it in ``lang`` (the Results page's name); another data set's
    class, as it is."""
    return i18n.t(f"classes.{cls}", lang) if cls in CIFAR10_CLASSES else md_escape(cls)
