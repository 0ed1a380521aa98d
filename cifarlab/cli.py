"""``python -m cifarlab``: train, evaluate, export, trace shapes and prepare data."""
from __future__ import annotations

import argparse
import getpass
import json
import sys

from cifarlab import i18n
from cifarlab.core.config import (CIFAR10_CLASSES, PRESETS, TUTORIAL_SHORT_NAMES, ModelSpec,
                                  TrainConfig, knobs)
from cifarlab.core.safe_text import one_line
from cifarlab.errors import CifarLabError, ConfigError

EXIT_BAD_INPUT = 2   # bad input: this status and one line saying what was wrong


def integers(text: str) -> tuple[int, ...]:
    """"6,16" -> (6, 16); argparse names the flag and the value int() refuses."""
    return tuple(int(v) for v in text.replace(" ", "").split(","))


def _add_model_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("network (defaults: the tutorial's Net)")
    g.add_argument("--channels", type=integers, help="conv1,conv2 output channels (6,16)")
    g.add_argument("--kernels", type=integers, help="conv1,conv2 kernel sizes (5,5)")
    g.add_argument("--paddings", type=integers, help="conv1,conv2 paddings (0,0)")
    g.add_argument("--strides", type=integers, help="conv1,conv2 strides (1,1)")
    g.add_argument("--pool", type=int, help="max-pool size and stride (2)")
    g.add_argument("--hidden", type=integers, help="fc1,fc2 sizes (120,84)")
    g.add_argument("--width", type=int, help="width multiplier for channels and hidden sizes (1)")


def _model_spec(args) -> ModelSpec | None:
    """The tutorial's network resized by the flags typed; None: ``--net``'s network, whole."""
    values = {k: getattr(args, k) for k in ("channels", "kernels", "paddings", "strides", "pool",
                                            "hidden", "width") if getattr(args, k) is not None}
    return ModelSpec(**values) if values else None


def add_config_args(p: argparse.ArgumentParser, cls: type = TrainConfig) -> None:
    """One flag per knob of ``cls``; a flag not typed sets nothing, so a preset's value stands."""
    for f in knobs(cls):
        extra = {"choices": list(f.knob.choices)} if f.knob.kind == "choice" else {}
        default = "all" if f.default is None else f.default
        p.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=f.knob.parse,
                       default=argparse.SUPPRESS,  # argparse formats help with %: "%" -> "%%"
                       help=f"{i18n.t(f.knob.help)} (default: {default})".replace("%", "%%"),
                       **extra)


def config_from_args(args, cls: type = TrainConfig) -> TrainConfig:
    """The flags typed, over ``--preset``'s knobs, over the config's defaults."""
    preset = getattr(args, "preset", None)
    values = PRESETS[preset].knob_values(preset_only=True) if preset else {}
    values.update({f.name: getattr(args, f.name) for f in knobs(cls) if hasattr(args, f.name)})
    return cls(**values, model=_model_spec(args))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m cifarlab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    t = sub.add_parser("train", help="train the network (defaults: the tutorial as written)")
    t.add_argument("--preset", choices=list(PRESETS), default=None,
                   help="start from a preset; the other flags given override it")
    add_config_args(t)
    t.add_argument("--out", default="cifar_net.pth", help="checkpoint path (cifar_net.pth)")
    _add_model_args(t)

    e = sub.add_parser("eval", help="evaluate a checkpoint on the test set")
    e.add_argument("checkpoint")
    e.add_argument("--device", default="auto")

    s = sub.add_parser("shapes", help="trace a layer stack: output shapes, parameters, formulas")
    s.add_argument("--layers", help="a JSON list, e.g. "
                   """'[{"type": "conv", "out_channels": 6, "kernel_size": 5}]'""")
    s.add_argument("--input", type=integers, default=(3, 32, 32), help="C,H,W (3,32,32)")
    _add_model_args(s)

    da = sub.add_parser("data", help="decode the data set once into the cache and describe it")
    for p in (t, e, da):
        p.add_argument("--data", default=None, help="image folder, .tar.gz, or 'download'")
    for p in (t, e, s, da):
        p.add_argument("--json", action="store_true", help="print one JSON object instead")

    x = sub.add_parser("export", help="the script, notebook or zip that repeats a run")
    x.add_argument("checkpoint", help="a CIFAR Lab checkpoint (.pth)")
    x.add_argument("-o", "--output", default="cifar_run.py",
                   help="its suffix picks the format: .py, .ipynb or .zip; a folder: "
                        "cifar_run.py in it (cifar_run.py)")
    x.add_argument("--lang", default=i18n.DEFAULT, choices=list(i18n.LANGUAGES),
                   help="the notebook's and the model card's language (en)")

    sub.add_parser("passphrase", help="print the instructor's line for .streamlit/secrets.toml")

    from cifarlab.lab.gpu.cli import register_cli  # `bench`: no torch until it runs

    register_cli(sub)
    return parser


def print_accuracy_lines(per_class: dict[str, float], accuracy: float, total: int) -> None:
    """The tutorial's prints, its short class names ("plane") for CIFAR-10's."""
    print("Accuracy of the network on the %d test images: %d %%" % (total, 100 * accuracy))
    for name, acc in per_class.items():
        short = dict(zip(CIFAR10_CLASSES, TUTORIAL_SHORT_NAMES)).get(name, name)
        print("Accuracy of %5s : %2d %%" % (short, 100 * acc))


def cmd_train(args) -> int:
    config = config_from_args(args)   # a mistyped value is refused before torch loads
    from cifarlab.core import data as data_mod
    from cifarlab.core.train import train

    config.check_runtime()  # the device, before spending time on the data
    data = data_mod.load(args.data)

    def on_event(event) -> None:
        d = event.data
        if event.kind == "running_loss" and not args.json:
            print("[%d, %5d] loss: %.3f" % (d["epoch"], d["i"], d["loss"]), flush=True)

    result = train(config, data, on_event=on_event, checkpoint_path=args.out)
    if args.json:
        print(json.dumps(result.summary()))
    elif result.diverged:
        print("error: " + i18n.t("errors.train.diverged", lr=config.lr, **result.diverged),
              file=sys.stderr)
        return 1
    else:
        print("Finished Training")
        ev = result.eval
        print_accuracy_lines(ev.per_class_accuracy, ev.accuracy, ev.total)
        print(f"steps={result.steps} train_s={result.train_seconds:.2f} "
              f"steps_per_s={result.steps_per_second:.1f} "
              f"images_per_s={result.images_per_second:.0f} "
              f"eval_s={ev.seconds:.2f} checkpoint={result.checkpoint}")
    if result.checkpoint_error is not None:   # a full disk lost it: the results were printed
        print(f"error: {result.checkpoint_error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


def cmd_eval(args) -> int:
    from cifarlab.core import checkpoint as ckpt, data as data_mod
    from cifarlab.core.devices import resolve_device
    from cifarlab.core.evaluate import evaluate

    device = resolve_device(args.device)
    # a file from this machine's own command line: no upload budget on its size
    cp = ckpt.load(args.checkpoint, map_location="cpu", max_params=None)
    data = data_mod.load(args.data)
    if tuple(cp.classes) != tuple(data.classes):
        raise CifarLabError("cli.other_classes", trained=", ".join(cp.classes),
                            found=", ".join(data.classes))
    result = evaluate(cp.model(), data, device, tta=cp.config.tta)  # as the run was tested
    if args.json:
        print(json.dumps(result.summary() | dict(
            test_accuracy=result.accuracy, checkpoint=args.checkpoint,
            config=cp.config.to_dict(), device=str(device))))
        return 0
    print_accuracy_lines(result.per_class_accuracy, result.accuracy, result.total)
    return 0


def cmd_shapes(args) -> int:
    import pandas as pd

    from cifarlab.core.shapes import total_params, trace, trace_spec, trace_table

    if args.layers:
        try:
            layers = json.loads(args.layers)
        except json.JSONDecodeError as err:
            raise CifarLabError("cli.layers_json", reason=err.msg, column=err.colno) from None
        traces = trace(layers, tuple(args.input))
    else:
        traces = trace_spec(_model_spec(args) or ModelSpec(), tuple(args.input))
    rows = trace_table(traces)
    if args.json:
        print(json.dumps({"layers": rows, "total_params": total_params(traces)}))
        return 0
    cols = ["layer", "kind", "input", "output", "params", "formula"]
    print(pd.DataFrame(rows, columns=cols).fillna("").to_string(index=False))
    print(f"total parameters: {total_params(traces):,}")
    return 0


def cmd_data(args) -> int:
    from cifarlab.core import data as data_mod

    data = data_mod.load(args.data, on_progress=None if args.json else
                         (lambda msg: print(msg, file=sys.stderr, flush=True)))
    facts = {"source": data.source, "key": data.key, "classes": list(data.classes),
             "train": int(len(data.train_y)), "test": int(len(data.test_y)),
             "notes": list(data.notes)}
    print(json.dumps(facts) if args.json else "\n".join(f"{k}: {v}" for k, v in facts.items()))
    return 0


def cmd_export(args) -> int:
    from cifarlab.core import checkpoint as ckpt
    from cifarlab.core.export.bundle import write_export

    # a file from this machine's own command line: no upload budget on its size
    cp = ckpt.load(args.checkpoint, map_location="cpu", max_params=None)
    path = write_export(cp, args.output, name=args.checkpoint, lang=args.lang)
    print(f"wrote {one_line(path)} ({cp.config.describe()})")
    return 0


def cmd_passphrase(args) -> int:
    """The secrets.toml line holding the passphrase's salted scrypt hash (never the phrase)."""
    from cifarlab.serve import identity

    if sys.stdin.isatty():
        phrase = getpass.getpass("Instructor passphrase: ")
        if phrase and getpass.getpass("The same again: ") != phrase:
            raise identity.IdentityError("identity.passphrase_mismatch")
    else:   # a script: echo "$PASSPHRASE" | python -m cifarlab passphrase
        phrase = sys.stdin.readline().rstrip("\r\n")
    if not phrase:
        raise identity.IdentityError("identity.passphrase_empty")
    print(f"# paste under [{identity.SECRETS_TABLE}] in .streamlit/secrets.toml:", file=sys.stderr)
    print(identity.secrets_line(identity.hash_passphrase(phrase)))
    return 0


COMMANDS = {"train": cmd_train, "eval": cmd_eval, "shapes": cmd_shapes, "data": cmd_data,
            "export": cmd_export, "passphrase": cmd_passphrase}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler = COMMANDS.get(args.command) or args.handler   # bench's: register_cli sets it
    try:
        return handler(args)
    except ConfigError as err:   # each value named by its flag's name
        print("error: " + " ".join(f"{k}: {v}" for k, v in err.texts().items()), file=sys.stderr)
        return EXIT_BAD_INPUT
    except CifarLabError as err:   # one line, even where a file's name holds a line break
        print(f"error: {one_line(err)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
