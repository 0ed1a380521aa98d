"""Real short training runs on the real data: events, reproducibility, cancel, evaluation,
checkpoints (round trip into the tutorial's own Net, torn files, malicious pickles) and the CLI."""
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from cifarlab.core import checkpoint as ckpt
from cifarlab.cli import main as cli_main
from cifarlab.core.config import TrainConfig
from cifarlab.errors import CheckpointError
from cifarlab.core.evaluate import evaluate, result_from_probabilities
from cifarlab.core.model import Net
from cifarlab.core.train import train
from tutorial_net import Net as TutorialNet

ROOT = Path(__file__).resolve().parents[1]
QUICK = dict(epochs=1, train_subset=4000, batch_size=8, num_workers=0, pipeline="fast", lr=0.01)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Train and evaluate on one CPU thread, as a worker does (worker_threads): on a busy
    2-core machine a second thread mostly spins, waiting for the first."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def quick_run(cifar_data, tmp_path_factory):
    events = []
    path = tmp_path_factory.mktemp("ckpt") / "run.pth"
    result = train(TrainConfig(**QUICK, log_every=50), cifar_data, on_event=events.append,
                   checkpoint_path=path)
    return result, events, path


def test_short_run_learns_and_reports_every_event(quick_run):
    result, events, _ = quick_run
    kinds = [e.kind for e in events]
    assert kinds[0] == "start" and kinds[-1] == "done"
    for kind in ("losses", "running_loss", "progress", "epoch", "eval"):
        assert kind in kinds
    start = events[0].data
    assert start["steps_per_epoch"] == 500 and start["total_steps"] == 500
    # every step's loss arrives exactly once, in order
    steps = [s for e in events if e.kind == "losses" for s in e.data["steps"]]
    assert steps == list(range(1, 501))
    assert len(result.losses) == result.steps == 500
    # the tutorial's running-loss line is the mean of the last log_every step losses
    first = next(e.data for e in events if e.kind == "running_loss")
    assert first["i"] == 50
    assert first["loss"] == pytest.approx(np.mean(result.losses[:50]))
    # it learned something: the loss fell and accuracy beats chance (10 %)
    assert np.mean(result.losses[-50:]) < np.mean(result.losses[:50]) - 0.1
    assert result.eval.accuracy > 0.2
    epoch = next(e.data for e in events if e.kind == "epoch")
    assert epoch["images_per_second"] > 0
    assert epoch["data_wait_s"] >= 0 and epoch["compute_s"] > 0
    progress = [e.data for e in events if e.kind == "progress"]
    waits = [p["data_wait_s"] for p in progress]
    assert waits == sorted(waits) and waits[-1] == pytest.approx(epoch["data_wait_s"])
    assert start["n_test"] == 10_000
    assert result.images == 4000 and result.images_per_second > 0


def test_same_seed_same_losses_on_cpu(cifar_data):
    cfg = TrainConfig(epochs=1, train_subset=320, batch_size=32, num_workers=0, pipeline="fast",
                      seed=7, device="cpu")
    a = train(cfg, cifar_data, evaluate_after=False)
    b = train(cfg, cifar_data, evaluate_after=False)
    c = train(cfg.replace(seed=8), cifar_data, evaluate_after=False)
    assert a.losses == b.losses
    assert a.losses != c.losses


def test_tutorial_pipeline_with_workers_is_reproducible(cifar_data):
    cfg = TrainConfig(epochs=1, train_subset=256, batch_size=32, num_workers=2, seed=3,
                      device="cpu")
    a = train(cfg, cifar_data, evaluate_after=False)
    b = train(cfg, cifar_data, evaluate_after=False)
    assert a.steps == 8 and a.losses == b.losses


def test_cancel_between_steps_keeps_a_partial_result(cifar_data):
    seen = []

    def stop():
        return len(seen) >= 1

    result = train(TrainConfig(epochs=3, train_subset=3200, batch_size=32, num_workers=0,
                               pipeline="fast"), cifar_data,
                   on_event=lambda e: seen.append(e) if e.kind == "losses" else None,
                   should_stop=stop)
    assert result.cancelled
    assert 0 < result.steps < 300
    assert result.eval is not None and 0 <= result.eval.accuracy <= 1
    assert result.epochs[-1]["complete"] is False


def test_evaluation_matches_a_hand_count(cifar_data):
    torch.manual_seed(0)
    net = Net()
    res = evaluate(net, cifar_data)
    assert res.total == 10_000 and sum(map(sum, res.confusion)) == 10_000
    labels = np.asarray(cifar_data.test_y)
    assert res.correct == int((res.predictions == labels).sum())
    assert res.accuracy == pytest.approx(res.correct / 10_000)
    assert np.allclose(res.probabilities.sum(axis=1), 1, atol=1e-4)
    # per-class accuracy from the confusion matrix, counted by hand for one class
    k = 3
    mask = labels == k
    assert res.per_class_accuracy[cifar_data.classes[k]] == pytest.approx(
        (res.predictions[mask] == k).mean())


def test_per_class_and_confusion_on_a_hand_made_case():
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], dtype=np.float32)
    labels = np.array([0, 1, 1, 1])
    r = result_from_probabilities(probs, labels, ("a", "b"))
    assert r.confusion == [[1, 0], [1, 2]]
    assert r.per_class_accuracy == {"a": 1.0, "b": pytest.approx(2 / 3)}
    assert r.accuracy == 0.75 and r.predictions.tolist() == [0, 1, 0, 1]


def test_checkpoint_round_trip_into_the_tutorials_own_net(quick_run, cifar_data):
    result, _, path = quick_run
    cp = ckpt.load(path)
    assert cp.config == result.config and cp.classes == tuple(cifar_data.classes)
    assert cp.results["test_accuracy"] == pytest.approx(result.eval.accuracy)
    tutorial = TutorialNet()
    tutorial.load_state_dict(cp.state_dict)  # the tutorial's class takes our weights
    x = torch.randn(4, 3, 32, 32)
    torch.testing.assert_close(tutorial(x), result.model(x))
    # and back: the tutorial's own torch.save(net.state_dict(), PATH) loads here
    plain = path.with_name("cifar_net.pth")
    torch.save(tutorial.state_dict(), plain)
    back = ckpt.load(plain)
    assert back.plain and back.config == TrainConfig()
    torch.testing.assert_close(back.model()(x), tutorial(x))


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "run.pth"
    ckpt.save(path, Net(), TrainConfig(), ("a",) * 10, {})
    before = path.read_bytes()

    def boom(obj, f):
        f.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(ckpt.torch, "save", boom)
    with pytest.raises(OSError):
        ckpt.save(path, Net(), TrainConfig(lr=0.5), ("a",) * 10, {})
    assert path.read_bytes() == before  # the old file is intact, no torn file
    assert [p.name for p in tmp_path.iterdir()] == ["run.pth"]  # no temp file left behind


def test_torn_or_foreign_files_are_refused(tmp_path):
    good = tmp_path / "good.pth"
    ckpt.save(good, Net(), TrainConfig(), ("x",) * 10, {})
    torn = tmp_path / "torn.pth"
    torn.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    with pytest.raises(CheckpointError, match="not a readable") as info:
        ckpt.load(torn)
    assert info.value.code == "checkpoint.not_readable" and "torn.pth" in info.value.text("es")
    text = tmp_path / "notes.pth"
    text.write_text("hello")
    with pytest.raises(CheckpointError):
        ckpt.load(text)
    with pytest.raises(CheckpointError, match="No checkpoint") as info:
        ckpt.load(tmp_path / "missing.pth")
    assert info.value.code == "checkpoint.missing"
    other = tmp_path / "other.pth"
    torch.save({"a": 1}, other)
    with pytest.raises(CheckpointError, match="not a CIFAR Lab checkpoint") as info:
        ckpt.load(other)
    assert info.value.code == "checkpoint.not_ours"


class _Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pth"
    with open(evil, "wb") as f:
        torch.save({"state_dict": _Exploit(marker)}, f)
    with pytest.raises(CheckpointError, match="not a safe checkpoint") as info:
        ckpt.load(evil)
    assert info.value.code == "checkpoint.unsafe" and "evil.pth" in info.value.text("pt")
    raw = tmp_path / "raw.pkl"
    raw.write_bytes(pickle.dumps(_Exploit(marker)))
    with pytest.raises(CheckpointError):
        ckpt.load(raw)
    assert not marker.exists()


def test_cli_train_json_and_eval(cifar_archive, tmp_path, capsys):
    out = tmp_path / "c.pth"
    code = cli_main(["train", "--epochs", "1", "--train-subset", "640", "--batch-size", "32",
                     "--num-workers", "0", "--pipeline", "fast", "--data", str(cifar_archive),
                     "--out", str(out), "--json"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    for key in ("test_accuracy", "per_class_accuracy", "steps", "train_seconds",
                "images_per_second", "checkpoint", "config"):
        assert key in doc
    assert doc["steps"] == 20 and 0 <= doc["test_accuracy"] <= 1
    assert len(doc["per_class_accuracy"]) == 10 and Path(doc["checkpoint"]) == out
    assert doc["config"]["batch_size"] == 32
    assert cli_main(["eval", str(out), "--data", str(cifar_archive), "--json"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert ev["test_accuracy"] == pytest.approx(doc["test_accuracy"])


def test_cli_prints_the_tutorials_lines(cifar_archive, tmp_path, capsys):
    # main() in this process: `python -m cifarlab` itself (its exit status, its stderr) is
    # test_cli_bad_input_exits_2_with_one_line_from_the_shell's
    assert cli_main(["train", "--epochs", "1", "--train-subset", "400", "--batch-size", "4",
                     "--num-workers", "0", "--log-every", "50", "--data", str(cifar_archive),
                     "--out", str(tmp_path / "t.pth")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "[1,    50] loss: " + lines[0].split("loss: ")[1]
    assert "Finished Training" in lines
    assert any(line.startswith("Accuracy of the network on the 10000 test images: ")
               for line in lines)
    assert any(line.startswith("Accuracy of plane : ") for line in lines)


BAD_INPUT = [
    (["train", "--lr", "-1"], "learning rate"),
    (["train", "--batch-size", "0"], "batch size"),
    (["train", "--device", "cuda:9"], "cuda:9"),
    (["train", "--data", "/nonexistent/cifar"], "/nonexistent/cifar"),
    (["eval", "/nonexistent.pth"], "No checkpoint"),
    (["shapes", "--kernels", "5,15"], "conv2"),
    (["shapes", "--layers", "[not json"], "not valid JSON"),
]


def test_cli_bad_input_exits_2_with_one_line_from_the_shell(tmp_path):
    # one real `python -m cifarlab` (the entry point, its exit status and stderr); the other
    # cases call the same main() in this process (each interpreter start costs ~5 s of CI)
    args, words = BAD_INPUT[0]
    proc = subprocess.run([sys.executable, "-m", "cifarlab", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert words in err


def test_a_mistyped_train_value_is_answered_before_torch_loads(monkeypatch, capsys):
    # the training code (torch) takes seconds to import: a typo is answered without it
    monkeypatch.setitem(sys.modules, "cifarlab.core.train", None)   # importing it: an error
    assert cli_main(["train", "--lr", "-1"]) == 2
    assert "learning rate" in capsys.readouterr().err


@pytest.mark.parametrize("args,words", BAD_INPUT)
def test_cli_bad_input_exits_2_with_one_line(args, words, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli_main(args) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert words in err and captured.out == ""


def test_cli_shapes_table(capsys):
    assert cli_main(["shapes", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["total_params"] == 62006


def test_fast_pipelines_fused_sgd_makes_the_tutorials_update():
    from cifarlab.core.train import make_optimizer

    torch.manual_seed(0)
    a, b = Net(), Net()
    b.load_state_dict(a.state_dict())
    opt_a = make_optimizer(TrainConfig(pipeline="tutorial"), a, torch.device("cpu"))
    opt_b = make_optimizer(TrainConfig(pipeline="fast"), b, torch.device("cpu"))
    assert opt_b.defaults.get("fused") and not opt_a.defaults.get("fused")
    x, y = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
    for _ in range(5):  # momentum buffers build up over several steps
        for net, opt in ((a, opt_a), (b, opt_b)):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        torch.testing.assert_close(pa, pb, atol=1e-6, rtol=1e-5, msg=name)


def _checkpoint_with(tmp_path, state, config=None, name="odd.pth"):
    from cifarlab.core.config import CIFAR10_CLASSES

    payload = {"format": ckpt.FORMAT, "version": ckpt.VERSION, "state_dict": state,
               "config": (config or TrainConfig()).to_dict(), "classes": list(CIFAR10_CLASSES),
               "results": {}}
    path = tmp_path / name
    torch.save(payload, path)
    return path


def test_weights_are_checked_against_the_network_before_it_is_built(tmp_path):
    state = Net().state_dict()
    state["fc1.weight"] = torch.zeros(120, 576)       # conv layers of another network
    with pytest.raises(CheckpointError) as info:
        ckpt.load(_checkpoint_with(tmp_path, state))
    err = info.value
    assert err.code == "checkpoint.wrong_shape" and err.params["weights"] == "fc1.weight"
    assert "120×576" in err.text("es") and "120×400" in err.text("pt")
    missing = dict(Net().state_dict())
    del missing["fc3.bias"]
    with pytest.raises(CheckpointError) as info:
        ckpt.load(_checkpoint_with(tmp_path, missing))
    assert info.value.code == "checkpoint.missing_weights" and "fc3.bias" in str(info.value)
    torch.save({**Net().state_dict(), "fc4.weight": torch.zeros(3)}, tmp_path / "plain.pth")
    with pytest.raises(CheckpointError) as info:     # a plain state_dict of another network
        ckpt.load(tmp_path / "plain.pth")
    assert info.value.code == "checkpoint.unexpected_weights"


def test_a_tensor_claiming_more_numbers_than_it_holds_is_refused(tmp_path):
    state = Net().state_dict()
    state["fc1.weight"] = torch.zeros(1).expand(120, 400)   # 4 bytes posing as 48,000 numbers
    path = _checkpoint_with(tmp_path, state)
    with pytest.raises(CheckpointError) as info:
        ckpt.load(path)
    assert info.value.code == "checkpoint.bad_tensor" and "fc1.weight" in info.value.text("es")


def test_the_parameter_budget_can_be_lifted_for_a_trusted_file(tmp_path):
    from cifarlab.core.config import ModelSpec

    spec = ModelSpec(width=2)
    path = ckpt.save(tmp_path / "w2.pth", Net(spec), TrainConfig(model=spec), ["c"] * 10)
    with pytest.raises(CheckpointError) as info:
        ckpt.load(path, max_params=100_000)
    assert info.value.code == "checkpoint.too_large" and info.value.params["params"] == 244962
    assert ckpt.load(path, max_params=None).config.model == spec
