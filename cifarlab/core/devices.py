"""Devices: what this machine has, how to pick one, and timing that synchronises them first."""
from __future__ import annotations

import os
import platform
import time
from dataclasses import asdict, dataclass

import torch

from cifarlab.errors import DeviceError


@dataclass(frozen=True)
class DeviceInfo:
    id: str                  # "cpu", "cuda:0", "mps"
    kind: str                # "cpu" | "cuda" | "mps"
    name: str                # "Intel Xeon ... (2 cores)", "NVIDIA H100 80GB HBM3", "Apple MPS"
    memory_bytes: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def cpu_name() -> str:
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{name} ({cpu_count()} cores)"


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps and mps.is_available())


def list_devices() -> list[DeviceInfo]:
    """Every device this process can train on: cpu, each cuda:N with its name, mps if present."""
    devices = [DeviceInfo("cpu", "cpu", cpu_name(), _host_memory())]
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            devices.append(DeviceInfo(f"cuda:{i}", "cuda", props.name, int(props.total_memory)))
    if mps_available():
        devices.append(DeviceInfo("mps", "mps", "Apple GPU (MPS)", None))
    return devices


def device_ids() -> list[str]:
    return [d.id for d in list_devices()]


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """The torch.device this machine has for "auto", "cpu", "cuda", "cuda:N" or "mps"; "auto"
    picks as the tutorial does (cuda:0 when available), then Apple's mps, then the cpu."""
    spec = str(device).strip().lower()
    if spec == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda:0")
        if mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    if spec == "cuda":
        spec = "cuda:0"
    present = device_ids()
    if spec not in present:
        raise DeviceError("devices.missing", field="device", device=spec,
                          present=", ".join(present))
    return torch.device(spec)


def device_name(device: torch.device | str) -> str:
    dev = torch.device(device)
    for info in list_devices():
        if info.id == (f"cuda:{dev.index or 0}" if dev.type == "cuda" else dev.type):
            return info.name
    return str(dev)


def synchronize(device: torch.device | str) -> None:
    """Wait for all queued work on the device to finish (no-op on the cpu)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    elif dev.type == "mps":
        torch.mps.synchronize()


class Stopwatch:
    """A timer that synchronises the device before each reading of the clock."""

    def __init__(self, device: torch.device | str = "cpu"):
        self.device = torch.device(device)
        self.seconds, self._t0 = 0.0, None

    def start(self) -> Stopwatch:
        synchronize(self.device)
        self._t0 = time.perf_counter()
        return self

    def stop(self) -> float:
        synchronize(self.device)
        self.seconds, self._t0 = time.perf_counter() - self._t0, None
        return self.seconds

    __enter__ = start

    def __exit__(self, *exc) -> None:
        self.stop()


def environment(device: torch.device | str | None = None) -> dict:
    """What a result was measured on: versions, CPU, GPU. Stored with every run and benchmark."""
    import torchvision

    env = {
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_name(),
        "cpu_count": cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    if device is not None:
        dev = torch.device(device)
        env["device"] = str(dev)
        env["device_name"] = device_name(dev)
        if dev.type == "cuda":
            props = torch.cuda.get_device_properties(dev)
            env["gpu_memory_bytes"] = int(props.total_memory)
    return env


def _host_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
