"""cifarlab.serve.settings: defaults, the environment over the file, bad values named with a code
in every language, the classroom limits, and the cores left to the web server."""
import os

import pytest

from cifarlab import i18n
from cifarlab.serve import settings as settings_mod
from cifarlab.serve.settings import SettingsError, load_settings


def test_settings_defaults_environment_and_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = load_settings(env={})
    cores = len(os.sched_getaffinity(0))
    assert s.home == tmp_path / "var" and s.db_path == tmp_path / "var" / "runs.db"
    assert s.cpu_slots == max(1, cores // 2) and s.gpu_slots == 1
    assert s.worker_threads == max(1, (cores - (cores > 2)) // s.cpu_slots)
    assert (s.max_queue, s.max_per_owner, s.max_epochs, s.max_train_images) == (50, 2, 20, 50000)
    assert (s.max_image_epochs_per_run, s.max_image_epochs_per_owner) == (500_000, 2_000_000)
    assert (s.max_num_workers, s.max_timing_seconds, s.worker_nice) == (8, 1200.0, 10)
    assert s.shared_view is False and s.data is None and s.spare_workers == 1
    assert s.slots_for("cpu") == s.cpu_slots and s.slots_for("cuda:1") == 1
    assert s.slots_for("mps") == 1

    (tmp_path / "cifarlab.toml").write_text(
        'home = "store"\ncpu_slots = 3\nshared_view = true\nmax_epochs = 5\n'
        'max_image_epochs_per_owner = 300000\nworker_nice = 4\n')
    s = load_settings(env={})
    assert s.home == tmp_path / "store" and s.cpu_slots == 3 and s.shared_view
    assert s.max_epochs == 5 and s.max_image_epochs_per_owner == 300000 and s.worker_nice == 4
    # the environment wins over the file
    s = load_settings(env={"CIFARLAB_CPU_SLOTS": "7", "CIFARLAB_SHARED_VIEW": "off",
                           "CIFARLAB_HOME": str(tmp_path / "h2"), "CIFARLAB_DATA": "/data/x",
                           "CIFARLAB_MAX_TIMING_SECONDS": "90", "CIFARLAB_WORKER_NICE": "0",
                           "CIFARLAB_MAX_NUM_WORKERS": "2"})
    assert s.cpu_slots == 7 and not s.shared_view and s.home == tmp_path / "h2"
    assert s.data == "/data/x" and s.max_timing_seconds == 90.0 and s.worker_nice == 0
    assert s.max_num_workers == 2
    other = tmp_path / "elsewhere.toml"
    other.write_text('[cifarlab]\nmax_queue = 9\n')
    assert load_settings(env={"CIFARLAB_CONFIG": str(other)}).max_queue == 9


def test_a_store_url_must_name_a_postgresql_or_sqlite_database():
    for url in ("postgresql://ana:pw@db/cifarlab", "sqlite:///srv/runs.db"):
        assert load_settings(env={"CIFARLAB_STORE_URL": url}).store_url == url
    assert load_settings(env={"CIFARLAB_STORE_URL": " "}).store_url is None
    for url, shown in (("mysql://ana:secret-pw@db/x", "mysql://ana:***@db/x"),
                       ("postgresql://ana:secret-pw@db", "postgresql://ana:***@db"),
                       ("runs.db", "'runs.db'"), ("sqlite://", "sqlite://")):
        with pytest.raises(SettingsError) as info:
            load_settings(env={"CIFARLAB_STORE_URL": url})
        assert info.value.code == "serve.settings.store_url"
        assert "CIFARLAB_STORE_URL" in str(info.value) and info.value.params["got"] == shown
        assert "secret-pw" not in str(info.value)


@pytest.mark.parametrize("cores, slots, threads", [(1, 1, 1), (2, 1, 2), (4, 2, 1), (8, 4, 1),
                                                   (16, 8, 1)])
def test_default_threads_leave_the_web_server_a_core(monkeypatch, cores, slots, threads):
    """On more than 2 cores, all CPU slots training at once use at most cores - 1."""
    monkeypatch.setattr(settings_mod, "cpu_cores", lambda: cores)
    s = load_settings(env={})
    assert (s.cpu_slots, s.worker_threads) == (slots, threads)
    if cores > 2:
        assert s.cpu_slots * s.worker_threads <= cores - 1
    s = load_settings(env={}, cpu_slots=1)
    assert s.worker_threads == max(1, cores - (cores > 2))


@pytest.mark.parametrize("env, message, code", [
    ({"CIFARLAB_CPU_SLOTS": "x"}, "CIFARLAB_CPU_SLOTS must be a whole number ≥ 1, got 'x'",
     "whole_number"),
    ({"CIFARLAB_CPU_SLOTS": "0"}, "CIFARLAB_CPU_SLOTS must be a whole number ≥ 1, got '0'",
     "whole_number"),
    ({"CIFARLAB_MAX_QUEUE": "2.5"}, "CIFARLAB_MAX_QUEUE must be a whole number ≥ 1, got '2.5'",
     "whole_number"),
    ({"CIFARLAB_SPARE_WORKERS": "-1"}, "CIFARLAB_SPARE_WORKERS must be a whole number ≥ 0",
     "whole_number"),
    ({"CIFARLAB_WORKER_NICE": "20"}, "CIFARLAB_WORKER_NICE must be a whole number from 0 to 19, "
     "got '20'", "whole_number_range"),
    ({"CIFARLAB_MAX_IMAGE_EPOCHS_PER_RUN": "0"}, "CIFARLAB_MAX_IMAGE_EPOCHS_PER_RUN must be a "
     "whole number ≥ 1", "whole_number"),
    ({"CIFARLAB_SHARED_VIEW": "maybe"}, "CIFARLAB_SHARED_VIEW must be true or false, got 'maybe'",
     "boolean"),
    ({"CIFARLAB_HEARTBEAT_TIMEOUT": "soon"}, "CIFARLAB_HEARTBEAT_TIMEOUT must be a number",
     "seconds"),
    ({"CIFARLAB_MAX_TIMING_SECONDS": "0.5"}, "CIFARLAB_MAX_TIMING_SECONDS must be a number of "
     "seconds ≥ 1, got '0.5'", "seconds"),
    ({"CIFARLAB_CONFIG": "/nonexistent/cifarlab.toml"}, "no file there", "no_config_file"),
    # max_per_owner's old name: refused, not left silently at the default
    ({"CIFARLAB_MAX_PER_SESSION": "1"}, "Unknown setting 'CIFARLAB_MAX_PER_SESSION'",
     "unknown_setting"),
])
def test_bad_settings_say_which_and_why(env, message, code):
    with pytest.raises(SettingsError) as info:
        load_settings(env=env)
    assert message in str(info.value)
    assert info.value.code == f"serve.settings.{code}"
    for lang in ("es", "pt"):  # the same facts in every language
        text = info.value.text(lang)
        assert text != str(info.value) and next(iter(env)) in text


def test_bad_settings_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("cpu_slots = 'four'\n")
    with pytest.raises(SettingsError, match=r"cpu_slots \(.*bad.toml\) must be a whole number"):
        load_settings(env={}, config_file=bad)
    bad.write_text("cpu_slotz = 4\n")
    with pytest.raises(SettingsError, match=r"unknown setting.*cpu_slotz"):
        load_settings(env={}, config_file=bad)
    bad.write_text("cpu_slots = \n")
    with pytest.raises(SettingsError, match="could not be read as TOML"):
        load_settings(env={}, config_file=bad)
    with pytest.raises(SettingsError, match="Unknown setting 'cpu_slotz'") as info:
        load_settings(env={}, cpu_slotz=3)
    assert "max_timing_seconds" in info.value.params["known"]


def test_the_readme_lists_every_setting():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert "README.md" in settings_mod.__doc__      # where the module sends its reader
    for name in settings_mod._FIELDS:
        env = settings_mod.env_name(name)
        assert f"`{name}`" in readme and f"`{env}`" in readme, name
    assert i18n.t("errors.serve.settings.whole_number", "es", where="X", min=10000,
                  got="'y'") == "X debe ser un número entero ≥ 10.000; se recibió 'y'."
