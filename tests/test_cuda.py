"""The CUDA paths, for real. Skipped on machines without a GPU (this lab's CPU machines and CI);
run on a GPU machine with `python -m pytest tests/test_cuda.py` (see docs/benchmarks.md for
when they last ran and where)."""
import numpy as np
import pytest
import torch

from cifarlab.core import checkpoint as ckpt
from cifarlab.core.config import TrainConfig
from cifarlab.core.data.pipelines import FastLoader, normalize, tutorial_loader
from cifarlab.core.devices import Stopwatch, environment, list_devices, resolve_device
from cifarlab.core.evaluate import evaluate
from cifarlab.core.train import train
from tutorial_net import Net as TutorialNet

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
QUICK = dict(epochs=1, train_subset=4000, batch_size=8, lr=0.01, device="cuda:0")


def test_auto_picks_cuda0_like_the_tutorial_and_lists_the_gpu():
    assert resolve_device("auto") == torch.device("cuda:0")
    gpus = [d for d in list_devices() if d.kind == "cuda"]
    assert gpus and gpus[0].id == "cuda:0" and gpus[0].memory_bytes > 0
    env = environment("cuda:0")
    assert env["device_name"] == torch.cuda.get_device_name(0) and env["cuda"]


@pytest.mark.parametrize("pipeline,workers", [("fast", 0), ("tutorial", 2)])
def test_training_on_cuda_learns_and_checkpoint_loads_on_cpu(cifar_data, tmp_path, pipeline,
                                                             workers):
    path = tmp_path / f"{pipeline}.pth"
    events = []
    result = train(TrainConfig(**QUICK, pipeline=pipeline, num_workers=workers), cifar_data,
                   on_event=events.append, checkpoint_path=path)
    assert result.device == "cuda:0" and result.steps == 500
    steps = [s for e in events if e.kind == "losses" for s in e.data["steps"]]
    assert steps == list(range(1, 501))  # batched read-back lost nothing
    assert np.mean(result.losses[-50:]) < np.mean(result.losses[:50])
    assert result.eval.accuracy > 0.2
    cp = ckpt.load(path, map_location="cpu")  # trained on the GPU, loaded on the CPU
    assert all(t.device.type == "cpu" for t in cp.state_dict.values())
    net = TutorialNet()
    net.load_state_dict(cp.state_dict)
    cpu_eval = evaluate(net, cifar_data, "cpu")
    assert cpu_eval.accuracy == pytest.approx(result.eval.accuracy, abs=0.005)


def test_fast_loader_resident_on_gpu_matches_the_tutorial_transform(cifar_data):
    fast = FastLoader(cifar_data, "train", 64, device="cuda:0", shuffle=False, seed=0)
    x, y = next(iter(fast))
    assert x.device.type == "cuda" and y.device.type == "cuda"
    ref, ref_y = next(iter(tutorial_loader(cifar_data, "train", 64, 0, False, 0)))
    torch.testing.assert_close(x.cpu(), ref, atol=1e-6, rtol=0)
    assert torch.equal(y.cpu(), ref_y)
    u8 = torch.from_numpy(np.array(cifar_data.train_x[:8])).cuda()
    torch.testing.assert_close(normalize(u8).cpu(), normalize(u8.cpu()), atol=1e-6, rtol=0)


def test_stopwatch_synchronises_before_reading_the_clock():
    a = torch.randn(4096, 4096, device="cuda:0")
    (a @ a).sum().item()  # warm-up
    with Stopwatch("cuda:0") as sw:
        for _ in range(20):
            a = a @ a / 4096
    # 20 products of 4096³ take milliseconds; an unsynchronised clock would read microseconds
    assert sw.seconds > 20 * 2 * 4096 ** 3 / 2e15


def test_cancel_on_cuda_keeps_a_partial_result(cifar_data):
    calls = {"n": 0}

    def stop():
        calls["n"] += 1
        return calls["n"] > 100

    result = train(TrainConfig(**{**QUICK, "epochs": 3}, pipeline="fast", num_workers=0),
                   cifar_data, should_stop=stop)
    assert result.cancelled and result.steps == 101 and result.eval is not None


# -- the CPU vs GPU lab on a real GPU (its CUDA branches are covered on the CPU in
# tests/test_gpu_lab.py with a faked device)

def test_timing_a_cuda_point_times_the_trained_step():
    from cifarlab.lab.gpu import measure, step
    from cifarlab.lab.gpu.config import SweepConfig, job_request

    w = step.Workload("cuda:0", 256, 1, "fast")
    try:  # the fused SGD kernel training uses for the fast pipeline, on the GPU
        assert w.optimizer.defaults["fused"] is True and w.fetch()[0].device.type == "cuda"
    finally:
        w.close()
    row = measure.measure_point("cuda:0", 256, 1, "fast", steps=5, warmup=2, repeats=2)
    assert row["device"] == "cuda:0" and row["device_kind"] == "cuda" and row["error"] == ""
    assert row["images_per_s"] > 0 and row["peak_memory_bytes"] > 0 and row["timed_steps"] == 10
    b = measure.breakdown("cuda:0", 64, 1, "tutorial", steps=3, warmup=1, num_workers=2)
    assert b["error"] == "" and b["h2d_s"] > 0 and b["forward_s"] > 0
    assert job_request(SweepConfig(devices=("cuda:0",)))["exclusive"] == ["cpu", "cuda:0"]
