"""The Ray actor's checkpoint folder (cifarlab/serve/ray_task.py): a killed actor cannot remove
its own, so the next actor on the node removes those whose process is gone. No Ray needed."""
import os
import subprocess
import sys
import tempfile

from cifarlab.serve import ray_task


def test_an_actors_folder_is_named_by_its_process_and_dead_actors_folders_go(tmp_path,
                                                                            monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = tmp_path / f"cifarlab-ray-{int(gone.stdout)}-abc"
    live = tmp_path / f"cifarlab-ray-{os.getppid()}-def"
    other = tmp_path / "cifarlab-ray-notapid-ghi"   # not one of ours: left alone
    for folder in (dead, live, other):
        folder.mkdir()
    (dead / "run.pth.tmp").write_bytes(b"partial")

    mine = ray_task.Outbox().folder

    assert mine.parent == tmp_path and mine.name.startswith(f"cifarlab-ray-{os.getpid()}-")
    assert not dead.exists() and live.is_dir() and other.is_dir() and mine.is_dir()
