"""Worker processes as the local executor sees them: starting one, stopping one by force, and
why one ended when it could not say. Workers are forked from a fork server that imported torch
once (``spawn`` where there is none): a new worker starts in a fraction of a second. The fork
server starts no thread of ours and no CUDA context.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import types
from dataclasses import dataclass
from typing import Any

from cifarlab.serve.executor import Handle
from cifarlab.serve.runs import reason

# What the fork server imports once, before it forks any worker.
PRELOAD = ["torch", "torchvision", "cifarlab.core.train", "cifarlab.core.data",
           "cifarlab.serve.worker"]


@dataclass
class Worker(Handle):
    process: Any = None                # a multiprocessing Process (forkserver or spawn)
    spare: Any = None                  # the Spare it was: its Event must outlive the start


@dataclass
class Spare:
    """A worker started ahead of need, warming up or warm, waiting for a job on its pipe."""

    process: Any
    conn: Any                          # the sending end of the job pipe
    ready: Any                         # an Event the spare sets once it is warm


_MAIN_LOCK = threading.Lock()


def context():
    """The start method for workers: ``forkserver`` preloaded with torch, else ``spawn``."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def _in_environment(env: dict, target, *args) -> None:
    """A worker's entry: the environment its server has now (a forked worker would otherwise
    have the fork server's, from when it started), then ``target``."""
    os.environ.clear()
    os.environ.update(env)
    target(*args)


def start_process(process) -> None:
    """Start a worker process without making it re-import the parent's ``__main__``: under
    Streamlit that is the page script (the worker would run the app), so an empty module
    stands in for it while the process starts."""
    with _MAIN_LOCK:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            process.start()
        finally:
            if main is not None:
                sys.modules["__main__"] = main


def kill(process) -> None:
    """Stop a worker by force, with its process group (its DataLoader workers; see
    ``worker._worker_main``), or alone while it has not made its group yet."""
    if process.exitcode is not None:
        return
    try:
        if process.pid and os.getpgid(process.pid) == process.pid:
            os.killpg(process.pid, signal.SIGKILL)
            return
    except (ProcessLookupError, PermissionError):
        pass
    process.kill()


def death_reason(exitcode: int) -> tuple[str, dict]:
    """(status, ``runs.reason``) for a worker that ended by itself without recording an outcome
    (one the queue stopped by force: ``executor.forced_reason``)."""
    if exitcode < 0:
        sig = -exitcode
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        code = "serve.worker.killed_oom" if sig == signal.SIGKILL else "serve.worker.killed"
        return "failed", reason(code, signal=sig, name=name)
    if exitcode == 0:
        return "failed", reason("serve.worker.no_result")
    return "failed", reason("serve.worker.exit_status", status=exitcode)
