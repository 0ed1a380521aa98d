"""Inside training: the probe's numbers are PyTorch's own (norms of the weights and of their
gradients right after a step; a ReLU that never fired computed again from the layers' outputs),
sampling changes nothing in the training, the signals fire on exploding, vanishing and dead
layers and not on a healthy run, and the Train page's engine says them in en/es/pt."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from cifarlab import i18n
from cifarlab.core import probes
from cifarlab.core.config import TrainConfig
from cifarlab.core.data import CifarData
from data_support import random_data
from cifarlab.core.model import Net
from cifarlab.core.train import train
from cifarlab.lab import train_live

CONFIG = TrainConfig(epochs=1, batch_size=8, num_workers=0, pipeline="fast", lr=0.01)


def tiny_data(n: int = 400) -> CifarData:
    return random_data(n, seed=5)


def test_a_sample_is_pytorchs_own_numbers():
    torch.manual_seed(0)
    net, x = Net(), torch.randn(8, 3, 32, 32)
    loss = F.cross_entropy(net(x), torch.arange(8))
    loss.backward()
    sample = probes.Probe(net, every=1).sample(7, x)
    assert sample["step"] == 7
    rows = {r["name"]: r for r in sample["layers"]}
    assert list(rows) == ["conv1", "conv2", "fc1", "fc2", "fc3"]
    for name, row in rows.items():
        layer = getattr(net, name)
        assert row["weight_norm"] == pytest.approx(layer.weight.norm().item(), rel=1e-6)
        assert row["grad_norm"] == pytest.approx(layer.weight.grad.norm().item(), rel=1e-6)
        assert sum(row["hist"]) == layer.weight.numel()
    # the layers' outputs again, by hand: a unit <= 0 for every image never fired its ReLU
    with torch.no_grad():
        c1 = net.conv1(x)
        c2 = net.conv2(net.pool(F.relu(c1)))
        h = torch.flatten(net.pool(F.relu(c2)), 1)
        f1 = net.fc1(h)
        f2 = net.fc2(F.relu(f1))
    for name, out in (("conv1", c1), ("conv2", c2), ("fc1", f1), ("fc2", f2)):
        dims = [0] + list(range(2, out.dim()))
        want = (out.amax(dim=dims) <= 0).float().mean().item()
        assert rows[name]["dead"] == pytest.approx(want)
    assert "dead" not in rows["fc3"]                 # no ReLU after the last layer


def test_sampling_changes_nothing_in_the_training(monkeypatch):
    events = []
    probed = train(CONFIG, tiny_data(), on_event=events.append, evaluate_after=False)
    samples = [e.data for e in events if e.kind == "inside"]
    assert len(samples) == 50 // probes.probe_every(50) and samples[0]["step"] == 10
    monkeypatch.setattr(probes.Probe, "due", lambda self, step: False)
    plain = train(CONFIG, tiny_data(), evaluate_after=False)
    assert probed.losses == plain.losses


def _sample(step, grads, dead=0.0):
    return {"step": step, "layers": [{"name": f"l{i}", "weight_norm": 1.0, "grad_norm": g,
                                      "dead": dead} for i, g in enumerate(grads)]}


@pytest.mark.parametrize("lang", ["en", "es", "pt"])
def test_the_signals_in_words(lang):
    healthy = [_sample(10, [0.5, 0.2]), _sample(20, [0.4, 0.3])]
    assert probes.signals(healthy) == [] and train_live.signal_texts(healthy, lang) == []
    exploding = [_sample(10, [0.5, 0.2]), _sample(20, [80.0, "nan"])]
    assert [c for c, _ in probes.signals(exploding)] == ["exploding", "exploding"]
    vanishing = [_sample(10, [0.5, 0.2]), _sample(20, [1e-6, 0.3], dead=0.75)]
    assert [c for c, _ in probes.signals(vanishing)] == ["vanishing", "dead", "dead"]
    texts = train_live.signal_texts(vanishing, lang)
    assert "l0" in texts[0] and i18n.percent(0.75, lang, 0) in texts[1]
    assert all("{" not in s for s in texts + train_live.signal_texts(exploding, lang))


def test_the_chart_and_table_of_a_real_run():
    events = []
    train(CONFIG, tiny_data(), on_event=events.append, evaluate_after=False)
    samples = [e.data for e in events if e.kind == "inside"]
    fig = train_live.grad_figure(samples, "pt")
    assert [tr.name for tr in fig.data] == ["conv1", "conv2", "fc1", "fc2", "fc3"]
    assert fig.layout.yaxis.type == "log" and list(fig.data[0].x) == [s["step"]
                                                                      for s in samples]
    table = train_live.latest_table(samples, "es")
    t = i18n.translator("es")
    assert list(table.columns) == [t("train.inside.layer"), t("train.inside.weight_norm"),
                                   t("train.inside.grad_norm"), t("train.inside.dead_col")]
    assert table[t("train.inside.dead_col")].iloc[-1] == "–"       # fc3: no ReLU after it


@pytest.mark.parametrize("lang", ["en", "es", "pt"])
def test_the_train_page_shows_inside_training_for_a_run(lang, tmp_path, cifar_archive,
                                                        cifar_cache_dir):
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    from data_support import pages_queue
    from synthetic_run import write_finished_run

    mp = pytest.MonkeyPatch()
    queue = pages_queue(mp, tmp_path / "home", cifar_archive, cifar_cache_dir)
    try:
        write_finished_run(queue.store, "inside-student-01")
        at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"),
                               default_timeout=180)
        at.query_params["lang"], at.query_params["sid"] = lang, "inside-student-01"
        at.switch_page("pages/train.py")
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        t = i18n.translator(lang)
        assert t("train.inside.title") in [e.label for e in at.expander]
        table = next(d.value for d in at.dataframe
                     if t("train.inside.grad_norm") in d.value.columns)
        assert list(table[t("train.inside.layer")]) == ["conv1", "conv2", "fc1", "fc2", "fc3"]
        assert list(table[t("train.inside.dead_col")])[:1] == [i18n.percent(0.125, lang, 0)]
    finally:
        queue.shutdown()
        mp.undo()


def test_no_dead_relus_are_counted_for_a_sigmoid_network():
    events = []
    train(CONFIG.replace(activation="sigmoid"), tiny_data(), on_event=events.append,
          evaluate_after=False)
    samples = [e.data for e in events if e.kind == "inside"]
    assert samples and all("dead" not in row for s in samples for row in s["layers"])
