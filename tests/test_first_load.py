"""A first visit says what it is loading from its first second (app.py, pages/home.py).

Home took 38 s on a loaded machine with only Streamlit's small running indicator: importing
torch (and torchvision) was most of it. Here a fresh interpreter, where torch was never imported,
runs the app (AppTest) with the heavy part replaced by a stand-in that records every message
sent to the browser so far and stops: the lab's "loading" status, Home's title and its route
must already be on their way, and torch still not imported, in each language.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cifarlab import i18n

ROOT = Path(__file__).resolve().parents[1]

PROBE = r'''
import json, sys, types
from google.protobuf.json_format import MessageToDict
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
from streamlit.testing.v1 import AppTest

seen = {}


def strings(node, out):
    if isinstance(node, dict):
        for v in node.values():
            strings(v, out)
    elif isinstance(node, list):
        for v in node:
            strings(v, out)
    elif isinstance(node, str):
        out.append(node)
    return out


def list_devices():   # the heavy part (torch's import and the devices): what was sent by now?
    runner = get_script_run_ctx()._enqueue.__self__
    seen["sent"] = [strings(MessageToDict(m.delta), []) for m in runner.forward_msgs()
                    if m.HasField("delta")]
    seen["torch"] = "torch" in sys.modules
    raise RuntimeError("the heavy part, stopped here")


fake = types.ModuleType("cifarlab.core.devices")
fake.list_devices = list_devices
sys.modules["cifarlab.core.devices"] = fake
import cifarlab.core
cifarlab.core.devices = fake
out = {}
for lang in sys.argv[2:]:
    seen.clear()
    at = AppTest.from_file(sys.argv[1], default_timeout=120)
    at.query_params["lang"] = lang
    at.run()
    out[lang] = dict(seen)
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def sent():
    langs = list(i18n.LANGUAGES)
    # no worker kept warm: its fork server would import torch beside the probe (in a process
    # of its own, so not what is checked, but seconds of CPU for nothing here)
    proc = subprocess.run([sys.executable, "-", str(ROOT / "app.py"), *langs], input=PROBE,
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "CIFARLAB_SPARE_WORKERS": "0"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_the_first_visit_says_what_is_loading_before_the_heavy_part(sent, lang):
    t = i18n.translator(lang)
    got = sent[lang]
    assert got["torch"] is False                       # the heavy part had not begun
    flat = [s for message in got["sent"] for s in message]
    where = {text: next(i for i, m in enumerate(got["sent"]) if text in m)
             for text in (t("loading.lab"), t("app.title"), t("home.route_title"),
                          t("loading.tools"))}
    # the lab's status first, then Home's title and route, then what the facts wait for
    assert where[t("loading.lab")] < where[t("app.title")] < where[t("home.route_title")] \
        < where[t("loading.tools")]
    assert t("nav.train") in " ".join(flat)             # the route's links are there already
