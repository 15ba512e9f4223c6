"""A headless Chromium driven through the DevTools protocol over a pipe
(``--remote-debugging-pipe``: the browser reads JSON commands on fd 3 and writes
replies and events on fd 4, each message ended by a NUL byte). No websocket
package and no driver binary are needed, only ``/usr/bin/chromium``.

Console messages, uncaught exceptions and browser log entries (CSP violations,
failed loads) are collected as events, so a test can assert that a page
produced none.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    "--remote-debugging-pipe",
)


def chromium_path() -> str | None:
    found = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    return found


class Browser:
    def __init__(self, executable: str, stderr_path: Path) -> None:
        self.profile = tempfile.mkdtemp(prefix="cg-chromium-")
        to_r, self._w = os.pipe()
        self._r, from_w = os.pipe()

        def wire_fds() -> None:  # in the child: our pipe ends become fds 3 and 4
            a, b = os.dup(to_r), os.dup(from_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self._stderr = stderr_path.open("w")
        self.proc = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            close_fds=False,
            preexec_fn=wire_fds,
        )
        os.close(to_r)
        os.close(from_w)
        self._buf = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []

    # ---- protocol ------------------------------------------------------------------------
    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._w, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            for reply in self._read(deadline):
                if reply.get("id") == self._next:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    result: dict[str, Any] = reply.get("result", {})
                    return result
                self.events.append(reply)

    def _read(self, deadline: float) -> list[dict[str, Any]]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from chromium")
            ready, _, _ = select.select([self._r], [], [], left)
            if ready:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise EOFError("chromium closed the pipe")
                self._buf += chunk
        *messages, self._buf = self._buf.split(b"\0")
        return [json.loads(m) for m in messages]

    def settle(self, seconds: float = 0.3) -> None:
        """Collect the events that arrive in the next ``seconds``."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                self.events.extend(self._read(deadline))
        except TimeoutError:
            pass

    # ---- pages ---------------------------------------------------------------------------
    def open_page(self, headers: dict[str, str] | None = None) -> str:
        """A new tab with console, log and network reporting on; returns its session id."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for method in ("Runtime.enable", "Log.enable", "Page.enable", "Network.enable"):
            self.send(method, session=session)
        if headers:
            self.send("Network.setExtraHTTPHeaders", {"headers": headers}, session=session)
        return str(session)

    def navigate(self, session: str, url: str) -> None:
        before = len(self.events)
        self.send("Page.navigate", {"url": url}, session=session)
        deadline = time.monotonic() + 30
        while not any(
            e.get("method") == "Page.loadEventFired" and e.get("sessionId") == session
            for e in self.events[before:]
        ):
            self.events.extend(self._read(deadline))

    def evaluate(self, session: str, expression: str) -> Any:
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True},
            session=session,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")

    def problems(self, session: str) -> list[str]:
        """Console errors/warnings, uncaught exceptions and error/warning log entries."""
        out = []
        for e in self.events:
            if e.get("sessionId") != session:
                continue
            method, params = e.get("method"), e.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in (
                "error",
                "warning",
                "assert",
            ):
                out.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Runtime.exceptionThrown":
                out.append(f"exception: {params.get('exceptionDetails')}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in (
                "error",
                "warning",
            ):
                out.append(f"log: {params['entry'].get('text')}")
            elif method == "Network.loadingFailed" and not params.get("canceled"):
                out.append(f"network: {params.get('errorText')}")
        return out

    def close(self) -> None:
        with contextlib.suppress(TimeoutError, EOFError, OSError, RuntimeError):
            self.send("Browser.close", timeout=5)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        os.close(self._w)
        os.close(self._r)
        self._stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)
