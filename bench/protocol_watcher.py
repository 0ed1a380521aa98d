"""A watcher that speaks Streamlit's websocket protocol and renders nothing.

In a classroom each student's browser runs on the student's computer; on a one-machine benchmark
ten Chromiums drawing plotly charts take the cores the training run needs, so what they measure
is the machine, not the server. This client asks the server for exactly what a browser asks for
(the page's first run, then a rerun of the live fragment whenever the server's ``auto_rerun``
message says, with the interval the page sets) and counts what comes back; it parses the
messages (protobuf) but draws nothing. bench_live.py runs both kinds of watcher.

Each watcher is an asyncio task on one shared event-loop thread (tornado's websocket client,
which Streamlit itself depends on); with ``niceness`` that thread runs at a lower priority
(Linux: a thread's nice value is its own), so the clients take what the server leaves.

Each watcher also keeps, with their ``time.time()``, what a student's page would show as news:
the live fragment's progress-bar texts (``progress``) and, for every fragment rerun it asked
for, when it asked and how long the server took to finish that rerun (``answers``; a rerun
asked for while another is pending is answered by the same run). bench_watchers.py reads them.
"""
from __future__ import annotations

import asyncio
import os
import threading
import time

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from tornado.websocket import websocket_connect


class ProtocolWatchers:
    """``n`` protocol watchers on one page URL path and query string; ``stop()`` ends them."""

    def __init__(self, base_url: str, page: str, query: str, n: int, niceness: int = 0):
        self.ws_url = base_url.replace("http://", "ws://") + "/_stcore/stream"
        self.page, self.query, self.n = page, query, n
        self.sent = self.received = self.bytes = 0
        self.counting = False
        self.finished_runs = 0          # script_finished messages (first runs and fragment runs)
        self.texts: list[str] = [""] * n  # the newest markdown/alert text each watcher got
        self.progress: list[list[tuple[float, str]]] = [[] for _ in range(n)]
        self.answers: list[tuple[float, float]] = []   # (asked at, seconds to the answer)
        self.pending: list[list[float]] = [[] for _ in range(n)]  # asked, not yet answered
        self.niceness = niceness
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._tasks: list = []

    def start(self) -> ProtocolWatchers:
        self._thread.start()
        for i in range(self.n):
            self._tasks.append(asyncio.run_coroutine_threadsafe(self._watch(i), self._loop))
        return self

    def _run(self) -> None:
        if self.niceness:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.niceness)
        self._loop.run_forever()

    def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def seen(self, text: str) -> int:
        """How many watchers have been sent a text element containing ``text``."""
        return sum(text in got for got in self.texts)

    async def _watch(self, i: int) -> None:
        ws = await websocket_connect(self.ws_url, subprotocols=["streamlit"],
                                     max_message_size=200 * 1024 * 1024)
        script_hash = ""
        timer: asyncio.Task | None = None

        async def send(fragment_id: str = "") -> None:
            msg = BackMsg()
            state = msg.rerun_script
            state.query_string = self.query
            state.page_name = "" if script_hash else self.page
            state.page_script_hash = script_hash
            if fragment_id:
                state.fragment_id = fragment_id
                state.is_auto_rerun = True
                self.pending[i].append(time.time())
            await ws.write_message(msg.SerializeToString(), binary=True)
            self.sent += self.counting

        async def every(seconds: float, fragment_id: str) -> None:
            while True:   # the browser's timer: a rerun of the fragment every `seconds`
                await asyncio.sleep(seconds)
                await send(fragment_id)

        await send()
        try:
            while True:
                raw = await ws.read_message()
                if raw is None:
                    return
                if self.counting:
                    self.received += 1
                    self.bytes += len(raw)
                msg = ForwardMsg()
                msg.ParseFromString(raw)
                kind = msg.WhichOneof("type")
                if kind == "new_session":
                    script_hash = msg.new_session.page_script_hash or script_hash
                elif kind == "navigation":
                    script_hash = msg.navigation.page_script_hash or script_hash
                elif kind == "auto_rerun":
                    if timer:
                        timer.cancel()
                    timer = asyncio.ensure_future(every(msg.auto_rerun.interval,
                                                        msg.auto_rerun.fragment_id))
                elif kind == "stop_auto_rerun" and timer:
                    timer.cancel()
                    timer = None
                elif kind == "script_finished":
                    self.finished_runs += 1
                    now = time.time()
                    self.answers += [(asked, now - asked) for asked in self.pending[i]]
                    self.pending[i].clear()
                elif kind == "delta":
                    el = msg.delta.new_element
                    which = el.WhichOneof("type")
                    if which == "markdown":
                        self.texts[i] = el.markdown.body + "\n" + self.texts[i][:2000]
                    elif which == "alert":
                        self.texts[i] = el.alert.body + "\n" + self.texts[i][:2000]
                    elif which == "progress":
                        self.progress[i].append((time.time(), el.progress.text))
        finally:
            if timer:
                timer.cancel()
            ws.close()


def wait_for(predicate, timeout: float, poll: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll)
    raise TimeoutError(f"timed out after {timeout:.0f} s")
