"""The owed GPU checks in one call, each measured against its goal; run by bench/gpu_check.sh.

    bash bench/gpu_check.sh                       # a CUDA machine: everything, under 8 minutes
    bash bench/gpu_check.sh --plan                # what it would run (also without CUDA), exit 0
    bash bench/gpu_check.sh --dry-cpu             # every step on the CPU with tiny settings
    bash bench/gpu_check.sh --steps gpu_fast,ray  # a second try of some steps

Steps, in this order (docs/gpu-results/README.md has the device call and what it carries):

1. ``pytest tests/test_cuda.py tests/test_graphs.py`` on CUDA: all pass; no CUDA test skipped.
2. ``bench/bench_graphs.py``: eager vs graphed steps/s (goal: graphed >= 5x eager at batch 4)
   and the tutorial's epoch both ways; its recording lands in the output folder.
3. The tutorial as written (``reference/tutorial_offline.py``) on cuda:0, then on the CPU, each
   capped at ``--tutorial-steps`` steps: the steps/s baseline, measured in the same call.
4. ``bench/bench_ray_share.py``: four runs on one GPU at once (``gpu_share`` = 4) against one
   alone, aggregate images/s.
5. ``python -m cifarlab train --preset gpu_fast --device cuda:0 --json``, three times (goal:
   >= 93 % test accuracy in <= 15 s of training, each run).
6. Only when a goal of step 2 or 5 was missed: ``bench/profile_train.py`` on what missed it.

A missed goal is reported as measured and does not fail the check; a step that crashed, timed
out, ran out of the time budget or measured something wrong does (exit 1). Without CUDA (and
without ``--dry-cpu``) it prints the plan and exits 0. Each step's output is streamed; after
every step ``summary.md`` and ``results.json`` are rewritten in the output folder, so a call
cut short still brings back what it measured.
"""
from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import importlib.util
import os
import platform
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import gpu_check_report as report
from gpu_check_steps import RUNNERS, STEPS, broke


class Check:
    """The run's context: where things are, the time budget, and how commands run."""

    def __init__(self, args):
        self.args = args
        self.plan, self.dry = args.plan, args.dry_cpu
        self.out, self.work = Path(args.out), Path(args.work)
        self.shared = Path(args.shared) if args.shared else ROOT.parent / "shared"
        self.archive = Path(args.data or os.environ.get("CIFARLAB_DATA")
                            or self.shared / "data" / "cifar10-jpeg.tar.gz")
        self.reference = self.shared / "reference" / "tutorial_offline.py"
        self.device = "cpu" if self.dry else args.device
        self.py = sys.executable
        self.started = time.monotonic()
        self.deadline = self.started + args.budget
        self.results: dict[str, dict] = {}
        self.env: dict = {}

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def run(self, cmd: list[str], cap_s: float, env: dict | None = None,
            tee: Path | None = None) -> dict | None:
        """Run ``cmd`` from the repository root, streaming its output; at most ``cap_s`` and
        never past the budget. None in plan mode (the command is printed)."""
        shown = " ".join(shlex.quote(str(c)) for c in cmd)
        if env:
            shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + shown
        print(f"  $ {shown}" + (f"    (at most {cap_s:.0f} s)" if self.plan else ""), flush=True)
        if self.plan:
            return None
        # --dry-cpu proves the script on a slow shared CPU: generous caps, nothing timed
        limit = min(cap_s * (5 if self.dry else 1), self.left() - 5)
        if limit < 10:
            return {"rc": None, "output": "", "seconds": 0.0, "timed_out": False,
                    "no_time": True, "limit": limit}
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        t0 = time.monotonic()
        proc = subprocess.Popen([str(c) for c in cmd], cwd=ROOT, env=full_env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=1,
                                start_new_session=True, errors="replace")
        lines: list[str] = []
        sink = open(tee, "a", encoding="utf-8") if tee else None

        def pump():
            for line in proc.stdout:
                lines.append(line)
                print("    " + line, end="", flush=True)
                if sink:
                    sink.write(line)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        timed_out = False
        try:
            proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            timed_out = True
            print(f"  !! stopped after {limit:.0f} s (its cap, or the budget)", flush=True)
        _end_group(proc)
        reader.join(timeout=5)
        if sink:
            sink.close()
        return {"rc": proc.returncode if not timed_out else None, "output": "".join(lines),
                "seconds": round(time.monotonic() - t0, 2), "timed_out": timed_out,
                "no_time": False, "limit": limit}


def _end_group(proc: subprocess.Popen) -> None:
    """Stop the command and whatever it left behind (DataLoader workers, Ray's processes)."""
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        if sig is signal.SIGTERM:
            try:   # the leader is gone; its group may not be
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            break


def environment(c: Check) -> dict:
    import torch

    env = {"python": platform.python_version(), "torch": torch.__version__,
           "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
           "cuda_available": torch.cuda.is_available(), "cpu_count": os.cpu_count(),
           "host": platform.node(), "started_utc": dt.datetime.now(dt.UTC)
           .isoformat(timespec="seconds"), "archive": str(c.archive),
           "reference": str(c.reference)}
    for pkg in ("ray", "babel", "torchvision", "numpy", "pytest"):
        try:   # None when this Python cannot import it
            env[pkg] = (importlib.metadata.version(pkg) if importlib.util.find_spec(pkg)
                        else None)
        except (importlib.metadata.PackageNotFoundError, ImportError):
            env[pkg] = None
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
        try:
            q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                "--format=csv,noheader"], capture_output=True, text=True,
                               timeout=20).stdout.strip()
            env["nvidia_smi"] = q
            env["driver"] = q.split(",")[1].strip() if q.count(",") >= 2 else None
            # the card as found: clocks, memory in use, other processes (METHOD.md: say so)
            print(subprocess.run(["nvidia-smi"], capture_output=True, text=True,
                                 timeout=20).stdout, flush=True)
        except (OSError, subprocess.TimeoutExpired):
            env["driver"] = None
    return env


def tiny_archive(path: Path) -> Path:
    """A small image-folder archive (10 classes, 16 train + 4 test JPEGs each) for --dry-cpu."""
    import io
    import tarfile

    import numpy as np
    from PIL import Image

    from cifarlab.core.config import CIFAR10_CLASSES

    if path.is_file():
        return path
    rng = np.random.default_rng(0)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for split, n in (("train", 16), ("test", 4)):
            for c, name in enumerate(CIFAR10_CLASSES):
                for i in range(n):
                    pixels = (rng.integers(0, 160, (32, 32, 3)) + 9 * c).astype(np.uint8)
                    buf = io.BytesIO()
                    Image.fromarray(pixels).save(buf, format="JPEG")
                    info = tarfile.TarInfo(f"{split}/{name}/{i:04d}.jpg")
                    info.size = buf.tell()
                    buf.seek(0)
                    tar.addfile(info, buf)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None, help="log and results (default: $OUT, else "
                    "gpu-check-<date>/)")
    ap.add_argument("--work", default="/tmp/cifarlab-gpu-check",
                    help="checkpoints, extracted data (never in --out: 8 files come back)")
    ap.add_argument("--shared", default=None, help="holds data/cifar10-jpeg.tar.gz and "
                    "reference/tutorial_offline.py (default: ../shared)")
    ap.add_argument("--data", default=None, help="the archive (default: $CIFARLAB_DATA, "
                    "else SHARED/data/cifar10-jpeg.tar.gz)")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--steps", default=",".join(STEPS), help="which steps, comma-separated")
    ap.add_argument("--budget", type=float, default=480.0, help="seconds for all the steps")
    ap.add_argument("--tutorial-steps", type=int, default=2000,
                    help="steps of the tutorial as written, on each device")
    ap.add_argument("--gpu-fast-runs", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="profile even when goals are met")
    ap.add_argument("--plan", action="store_true", help="print the plan and exit 0")
    ap.add_argument("--dry-cpu", action="store_true",
                    help="every step on the CPU with tiny settings (tries the script)")
    args = ap.parse_args(argv)
    wanted = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = set(wanted) - set(STEPS)
    if unknown:
        ap.error(f"unknown steps {sorted(unknown)}; the steps: {', '.join(STEPS)}")
    args.out = args.out or os.environ.get("OUT") or str(
        ROOT / f"gpu-check-{dt.datetime.now():%Y-%m-%d-%H%M%S}")

    import torch

    if not args.dry_cpu and not torch.cuda.is_available():
        args.plan = True
        print("No CUDA GPU here: this is the plan bench/gpu_check.sh runs on one (nothing is "
              "run; --dry-cpu runs every step on this CPU with tiny settings).\n")
    c = Check(args)
    c.out.mkdir(parents=True, exist_ok=True)
    c.work.mkdir(parents=True, exist_ok=True)
    c.env = environment(c)
    print(report.header(c.env, c.dry, args.budget), flush=True)
    if c.dry:
        c.archive = tiny_archive(c.work / "tiny-cifar.tar.gz")
    missing = [str(p) for p in (c.archive, c.reference) if not p.is_file()]
    if missing:
        print(f"MISSING: {', '.join(missing)} (give --shared DIR holding data/ and reference/; "
              "see docs/gpu-results/README.md)", flush=True)
        if not c.plan:
            return 2
    if not c.plan:   # decode once (timed apart): every step then reads the cache
        r = c.run([c.py, "-m", "cifarlab", "data", "--data", c.archive, "--json"], 120)
        if broke(r, "decoding the data set"):
            print(f"FAILED: {broke(r, 'decoding the data set')}", flush=True)
            return 2
    for n, key in enumerate(STEPS, start=1):
        if key not in wanted:
            continue
        print(f"\n== {n}. {report.TITLES[key]} — goal: {report.GOAL_TEXT[key]}", flush=True)
        t0 = time.monotonic()
        try:
            res = RUNNERS[key](c)
        except Exception as err:  # noqa: BLE001 - a step's own bug fails it, not the call
            import traceback

            traceback.print_exc()
            res = {"problems": [f"{type(err).__name__}: {err}"], "measured": ""}
        res["seconds"] = round(time.monotonic() - t0, 1)
        res["status"] = status(res, c.plan)
        c.results[key] = res
        if not c.plan:
            report.write(c.out, c.env, c.results, c.dry, time.monotonic() - c.started)
    if c.plan:
        print("\n" + report.plan_footer(c.env))
        return 0
    text = report.write(c.out, c.env, c.results, c.dry, time.monotonic() - c.started)
    print("\n" + text, flush=True)
    return exit_code(c.results)


def status(res: dict, plan: bool = False) -> str:
    """A step's status: a problem fails it; a missed goal does not."""
    return ("planned" if plan else "skipped" if res.get("skipped")
            else "FAILED" if res.get("problems") else "ok")


def exit_code(results: dict) -> int:
    return 1 if any(r["status"] == "FAILED" for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
