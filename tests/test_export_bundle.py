"""Take your run home (issue 12): the notebook, the TensorBoard logs, the model card and the zip
(cifarlab.core.export), and ``python -m cifarlab export -o run.ipynb | run.zip``.

The notebook is executed for real (nbclient, a kernel of this virtualenv's Python) on the small
image folder of tests/test_export.py (300 + 200 real CIFAR-10 images), once: the zip's, of a
tutorial-pipeline run; it must print the app's losses, step for step, and its accuracy. The
command line's notebook of the same run is that notebook, cell for cell; a fast-pipeline run's
notebook is the exported script's code (test_the_notebooks_code_is_the_scripts), which repeats
the app's run (test_export.py::test_the_script_repeats_the_apps_run_epoch_for_epoch).
TensorBoard's own reader loads the logs; the tutorial's own ``Net`` loads the weights.
"""
from __future__ import annotations

import io
import json
import re
import sys
import textwrap
import time
import zipfile

import nbformat
import numpy as np
import pytest
import torch
from babel.lists import format_list

from cifarlab import i18n
from cifarlab.cli import main
from cifarlab.core import checkpoint
from cifarlab.core.config import CIFAR10_CLASSES, ModelSpec, TrainConfig
from cifarlab.core.export.bundle import bundle_bytes
from cifarlab.core.export.card import model_card
from cifarlab.core.export.notebook import RESULTS_FILE, build_notebook, notebook_json, source_note
from cifarlab.core.export.record import RunRecord
from cifarlab.core.export.render import export_script, split_cells
from cifarlab.core.export.tensorboard import MAX_STEP_POINTS, hparams_of, step_points
from cifarlab.core.model import Net as LabNet
from cifarlab.core.train import train
# shared fixtures: small, and one_thread (autouse here too: one CPU thread for the module, as a
# busy 2-core server gives each run)
from test_export import LOSS_LINE, one_thread, small  # noqa: F401
from tutorial_net import Net as TutorialNet

RUN_ID = "5e1f0c2a9b8d4e7f8a6b5c4d3e2f1a0b"


def _train(config, data, path):
    """A real run as the worker records it: step losses from the events, per-epoch accuracy."""
    steps, losses = [], []

    def on_event(e):
        if e.kind == "losses":
            steps.extend(e.data["steps"])
            losses.extend(e.data["losses"])

    result = train(config, data, on_event=on_event, eval_each_epoch=True, checkpoint_path=path)
    assert losses == result.losses and result.env["torch_threads"] == 1
    return result, steps, losses


@pytest.fixture(scope="module")
def runs(small, tmp_path_factory):  # noqa: F811 - the fixture imported above
    """Two finished runs of 240 images, 2 epochs: the tutorial's DataLoader (2 workers) as the
    Runs page would bundle it, and the fast pipeline as a checkpoint for the command line."""
    _, _, data = small
    base = tmp_path_factory.mktemp("runs")
    tutorial = TrainConfig(epochs=2, train_subset=240, batch_size=4, num_workers=2, log_every=20,
                           device="cpu", pipeline="tutorial", seed=3)
    fast = tutorial.replace(pipeline="fast", num_workers=0, batch_size=8, lr=0.01, seed=4)
    out = {}
    for key, config in (("tutorial", tutorial), ("fast", fast)):
        result, steps, losses = _train(config, data, base / f"{key}.pth")
        record = RunRecord(config, result.model.state_dict(), tuple(data.classes),
                           results=result.summary(), losses=losses, steps=steps, env=result.env,
                           run_id=RUN_ID, name="Ensayo nº 1", created_at=time.time())
        out[key] = {"result": result, "record": record, "checkpoint": base / f"{key}.pth"}
    return out


# -- executing the notebook ------------------------------------------------------------------
@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """One Jupyter kernel of this interpreter (sys.executable: the .venv's, in a fresh clone's
    `make test` too) for every notebook of this module: torch is imported once."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    kernels = tmp_path_factory.mktemp("kernels")
    (kernels / "python3").mkdir()
    (kernels / "python3" / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (this virtualenv)", "language": "python"}))
    km = KernelManager(kernel_name="python3",
                       kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
    km.start_kernel(cwd=str(kernels))
    assert km.kernel_spec.argv[0] == sys.executable
    yield km
    km.shutdown_kernel(now=True)


def _execute(km, nb_path, cwd, data_source, threads):
    """Run every cell in ``cwd``, with CIFARLAB_DATA naming the offline images, after a cell
    of the test's own that clears what an earlier notebook left in the kernel and sets its
    CPU threads; (notebook, its printed text, what it saved in notebook_run.json)."""
    from nbclient import NotebookClient

    nb = nbformat.read(nb_path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(
        f"%reset -f\nimport os\nimport torch\nos.chdir({str(cwd)!r})\n"
        f"os.environ['CIFARLAB_DATA'] = {str(data_source)!r}\ntorch.set_num_threads({threads})"))
    NotebookClient(nb, km=km, timeout=600).execute()    # its km: the kernel stays up
    del nb.cells[0]
    return nb, _printed(nb), json.loads((cwd / RESULTS_FILE).read_text())


def _printed(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.get("outputs", []) if o.get("output_type") == "stream")


def _run_again(km, sources) -> str:
    """Run these cells once more in the kernel as an executed notebook left it; their print."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    NotebookClient(nb, km=km, timeout=600).execute()
    return _printed(nb)


def _check_same_run(measured, out, result, classes):
    """The notebook's step losses, running-loss lines and accuracy are the app's."""
    assert measured["losses"] == result.losses               # float for float, every step
    theirs = [(int(e), int(i), loss) for e, i, loss in LOSS_LINE.findall(out)]
    assert theirs == [(r["epoch"], r["i"], "%.3f" % r["loss"]) for r in result.running_losses]
    assert measured["accuracy"] == result.eval.accuracy
    assert measured["total"] == 200
    short = dict(zip(classes, ("plane", "car", "bird", "cat", "deer", "dog", "frog", "horse",
                               "ship", "truck")))
    assert measured["per_class"] == pytest.approx(
        {short[c]: a for c, a in result.eval.per_class_accuracy.items()}, abs=1e-12)
    lab = [e["mean_loss"] for e in result.epochs]
    assert measured["epoch_losses"] == pytest.approx(lab, rel=1e-12)


def test_the_zips_notebook_repeats_the_run_in_spanish(runs, small, kernel,  # noqa: F811 - fixture
                                                      tmp_path):
    """The Runs page's zip (tutorial pipeline, 2 DataLoader workers), unzipped and run: the same
    losses, accuracy and weights (it compares itself with the zip's cifar_net.pth)."""
    folder, _, data = small
    run = runs["tutorial"]
    blob = bundle_bytes(run["record"], "es")
    top = "cifarlab-ensayo-n-1-5e1f0c2a"
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        names = z.namelist()
        z.extractall(tmp_path)
    assert {n for n in names if "/runs/" not in n} == {
        f"{top}/ensayo-n-1-5e1f0c2a.ipynb", f"{top}/cifar_net.pth", f"{top}/README.md"}
    assert any(n.startswith(f"{top}/runs/ensayo-n-1-5e1f0c2a/events.out.tfevents.") for n in names)
    home = tmp_path / top
    # the kernel at 2 threads: the notebook itself sets the run's 1 (1 and 2 differ in the bits)
    nb, out, measured = _execute(kernel, home / "ensayo-n-1-5e1f0c2a.ipynb", home, folder, 2)
    device = next(c.source for c in nb.cells if c.source.startswith("if DEVICE == 'auto'"))
    assert device.endswith("\ntorch.set_num_threads(1)")
    _check_same_run(measured, out, run["result"], data.classes)
    assert re.search(r"Mayor diferencia con los pesos de CIFAR Lab: 0\.0$", out, re.M), out[-800:]
    # alone (the command line's notebook: no cifar_net.pth beside it), no weights to compare
    # with: the cells that read them, again in the same kernel without the file
    (home / "cifar_net.pth").unlink()
    again = _run_again(kernel, [c.source for c in nb.cells
                                if c.cell_type == "code" and "lab_state" in c.source])
    assert "Mayor diferencia" not in again and "CIFAR Lab:" in again, again
    # explained in Spanish, with the course's words
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert i18n.t("bundle.nb.train", "es", epochs=2, log_every=20) in markdown
    assert "tasa de aprendizaje 0,001" in markdown and "Training a Classifier" in markdown


def test_the_cli_notebook_is_the_zips_from_the_checkpoint_alone(runs, tmp_path, capsys):
    """``export CHECKPOINT -o run.ipynb``: from the checkpoint alone, the notebook the zip holds
    for the same run, code cell for code cell (only the line naming its source differs), so
    the zip's notebook executed above is this one executed; in English by default, with the
    run's own thread count (a 2-thread kernel switches to its 1)."""
    work = tmp_path / "work"
    work.mkdir()
    for key, lang in (("tutorial", "es"), ("fast", "en")):
        run = runs[key]
        path = work / f"{key}.ipynb"
        args = ["export", str(run["checkpoint"]), "-o", str(path)]
        assert main(args + (["--lang", lang] if lang != "en" else [])) == 0
        assert f"{key}.ipynb" in capsys.readouterr().out
        cli = nbformat.read(path, as_version=4)
        nbformat.validate(cli)
        code = [c.source for c in cli.cells if c.cell_type == "code"]
        assert "torch.set_num_threads(1)" in "\n".join(code)
        markdown = "\n".join(c.source for c in cli.cells if c.cell_type == "markdown")
        assert ("## Training" in markdown) == (lang == "en")
        with zipfile.ZipFile(io.BytesIO(bundle_bytes(run["record"], lang))) as z:
            (name,) = [n for n in z.namelist() if n.endswith(".ipynb")]
            zipped = nbformat.reads(z.read(name).decode(), as_version=4)
        theirs = [c.source for c in zipped.cells if c.cell_type == "code"]
        notes = (source_note(checkpoint_record(run["checkpoint"]), lang),
                 source_note(run["record"], lang))
        assert len(code) == len(theirs)
        for mine, zip_cell in zip(code, theirs):
            assert mine.replace(notes[0], "NOTE") == zip_cell.replace(notes[1], "NOTE"), mine


def checkpoint_record(path):
    """The run as the command line reads it from a checkpoint file."""
    return RunRecord.from_checkpoint(checkpoint.load(path, map_location="cpu", max_params=None),
                                     str(path))


# -- one source of truth -----------------------------------------------------------------------
@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_the_notebooks_code_is_the_scripts(lang):
    """Every code cell but the notebook's own three (data source, CIFAR Lab's weights, the
    comparison) is a cell of the exported script, verbatim (indented under __main__ there),
    but for the lines that keep every step's loss."""
    config = TrainConfig(model=ModelSpec(channels=(8, 24), kernels=(3, 3), paddings=(1, 1)),
                         pipeline="fast", seed=9)
    record = RunRecord(config, LabNet(config.model).state_dict(), tuple(CIFAR10_CLASSES))
    nb = nbformat.reads(notebook_json(record, lang), as_version=4)
    nbformat.validate(nb)
    script = export_script(config, source_note=source_note(record, lang), lang=lang)
    script = script.replace("import sys\n", "")   # the script alone reads sys.argv
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    own = [c for c in code if "CIFARLAB_DATA" in c or "lab_state" in c]
    assert len(own) == 3 and len(code) == len(split_cells(script)) + 2   # source: both
    for cell in code:
        if cell in own:
            continue
        cell = "\n".join(line for line in cell.splitlines() if "step_losses" not in line)
        assert cell in script or textwrap.indent(cell, "    ") in script, cell[:200]
        compile(cell, "cell", "exec")
    assert "self.conv1 = nn.Conv2d(3, 8, 3, padding=1)" in "\n".join(code)
    assert nb.metadata.kernelspec.name == "python3" and "colab" in nb.metadata
    assert [c.id for c in nb.cells] == [c.id for c in build_notebook(record, lang).cells]


# -- TensorBoard, weights, model card ------------------------------------------------------------
def test_tensorboards_reader_finds_every_step(runs, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    run = runs["tutorial"]
    record, result = run["record"], run["result"]
    with zipfile.ZipFile(io.BytesIO(bundle_bytes(record, "en"))) as z:
        z.extractall(tmp_path)
    logdir = tmp_path / "cifarlab-ensayo-n-1-5e1f0c2a" / "runs" / "ensayo-n-1-5e1f0c2a"
    ea = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "tensors": 0})
    ea.Reload()
    steps = ea.Scalars("step/loss")
    assert [s.step for s in steps] == list(range(1, 121))
    assert [s.value for s in steps] == [float(np.float32(v)) for v in result.losses]
    acc = ea.Scalars("epoch/accuracy")
    assert [(s.step, s.value) for s in acc] == [(e["epoch"], pytest.approx(e["accuracy"]))
                                                for e in result.epochs]
    assert [s.step for s in ea.Scalars("epoch/loss")] == [1, 2]
    assert ea.Scalars("hparam/accuracy")[0].value == pytest.approx(result.eval.accuracy)
    # the hyperparameters: every config field, as the HParams dashboard reads them
    content = ea.PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(
        content["_hparams_/session_start_info"]).session_start_info
    hp = {k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind"))
          for k, v in start.hparams.items()}
    assert hp["lr"] == pytest.approx(0.001) and hp["batch_size"] == 4 and hp["seed"] == 3
    assert hp["pipeline"] == "tutorial" and hp["train_subset"] == 240 and hp["model"] == "Net()"
    assert set(hp) == set(hparams_of(record))


def test_long_runs_are_logged_as_bucket_means():
    n = MAX_STEP_POINTS * 2 + 3
    record = RunRecord(TrainConfig(), {}, tuple(CIFAR10_CLASSES), losses=np.linspace(3, 1, n))
    points = step_points(record)
    assert len(points) <= MAX_STEP_POINTS and points[-1][0] == n
    assert points[0][1] == pytest.approx(np.mean(np.linspace(3, 1, n)[:3]))


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_the_weights_load_into_the_tutorials_net_and_the_card_names_the_accuracy(runs, lang):
    run = runs["tutorial"]
    record, result = run["record"], run["result"]
    with zipfile.ZipFile(io.BytesIO(bundle_bytes(record, lang))) as z:
        top = "cifarlab-ensayo-n-1-5e1f0c2a"
        state = torch.load(io.BytesIO(z.read(f"{top}/cifar_net.pth")), weights_only=True)
        card = z.read(f"{top}/README.md").decode("utf-8")
    net = TutorialNet()
    net.load_state_dict(state)
    for k, v in result.model.state_dict().items():
        assert torch.equal(net.state_dict()[k], v)
    acc = result.eval.accuracy
    assert i18n.t("bundle.card.accuracy", lang, acc=acc) in card
    assert i18n.percent(acc, lang, 1) in card
    for cls in result.eval.per_class_accuracy:
        assert f"| {i18n.t(f'classes.{cls}', lang)} (`" in card
    names = [i18n.t(f"classes.{c}", lang) for c in record.classes]
    assert i18n.t("bundle.card.data_text", lang, n=10, n_train=240, epochs=2, n_test=200,
                  classes=format_list(names, locale=i18n.BABEL_LOCALES[lang])) in card
    assert i18n.t("bundle.card.limits_title", lang) in card and "2.14" in card   # torch version
    assert i18n.t("bundle.card.file_logs", lang, logs="runs") in card


def test_a_checkpoints_card_and_logs_say_what_it_lacks(runs, tmp_path):
    """From a checkpoint alone (no step losses): per-epoch logs, and the card says so."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ckpt = checkpoint.load(runs["fast"]["checkpoint"])
    record = RunRecord.from_checkpoint(ckpt, name="fast.pth")
    assert record.step_losses() is None and record.slug == "fast"
    card = model_card(record, "pt")
    assert i18n.t("bundle.card.file_logs_epochs", "pt", logs="runs") in card
    with zipfile.ZipFile(io.BytesIO(bundle_bytes(record, "pt"))) as z:
        z.extractall(tmp_path)
    ea = EventAccumulator(str(tmp_path / "cifarlab-fast" / "runs" / "fast"))
    ea.Reload()
    assert "step/loss" not in ea.Tags()["scalars"] and len(ea.Scalars("epoch/loss")) == 2


# -- python -m cifarlab export -o run.zip | run.txt ---------------------------------------------
def test_cli_writes_the_bundle_and_refuses_an_unknown_suffix(runs, tmp_path, capsys):
    path = runs["tutorial"]["checkpoint"]
    out = tmp_path / "mine.zip"
    assert main(["export", str(path), "-o", str(out), "--lang", "pt"]) == 0
    assert "mine.zip" in capsys.readouterr().out
    with zipfile.ZipFile(out) as z:
        names = z.namelist()
        card = z.read("cifarlab-tutorial/README.md").decode()
    assert {"cifarlab-tutorial/tutorial.ipynb", "cifarlab-tutorial/cifar_net.pth",
            "cifarlab-tutorial/README.md"} <= set(names)
    assert i18n.t("bundle.card.title", "pt", name="tutorial") in card
    for bad in ("run.txt", "run"):
        assert main(["export", str(path), "-o", str(tmp_path / bad)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1
        assert ".py, .ipynb, .zip" in err and bad in err
        assert not (tmp_path / bad).exists()
    plain = tmp_path / "cifar_net.pth"
    torch.save(TutorialNet().state_dict(), plain)  # the tutorial's own line
    assert main(["export", str(plain), "-o", str(tmp_path / "x.ipynb")]) == 2
    assert "only a network's weights" in capsys.readouterr().err
