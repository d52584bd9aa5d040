"""Helpers for the device-flow suites: a server tuned for quick polls, and ``ltm auth HOST``
running in the background the way a person runs it in a terminal.
"""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpkit
import httpx
from clikit import LTM, Cli
from serverkit import Server, clean_env, init_db, run_server
from timing import scaled

# Poll every second (the protocol's default is 5) and keep the limits out of the way.
FAST = {
    "LTM_DEVICE_INTERVAL": "1",
    "LTM_DEVICE_WRONG_CODES_PER_CLIENT": "4",
    "LTM_DEVICE_WRONG_CODES_PER_USER": "4",
    "LTM_DEVICE_AUTHORIZE_PER_CLIENT": "1000",
}
GRANT = "urn:ietf:params:oauth:grant-type:device_code"
CODE_LINE = re.compile(r"enter the code: ([A-Z]{4}-[A-Z]{4})")
URL_LINE = re.compile(r"open (\S+)")


@contextmanager
def device_server(directory: Path, *, store: str = "sqlite", **env: str) -> Iterator[Server]:
    """``ltm server run`` with the device-flow knobs in ``env`` on top of ``FAST``.

    ``store="dynamodb"``: the same app and HTTP server on DynamoDB (moto's server).
    """
    directory.mkdir(parents=True, exist_ok=True)
    if store == "dynamodb":
        from dynamo_moto import running_dynamo_server

        with running_dynamo_server(directory, env={**FAST, **env}) as server:
            yield server
        return
    db = directory / "server.db"
    root = init_db(db)
    server = run_server(db, directory / "server.log", root, env=clean_env(**{**FAST, **env}))
    try:
        yield server
    finally:
        server.stop()


class AuthProcess:
    """``ltm auth HOST`` started in the background; its stderr read line by line."""

    def __init__(self, cli: Cli, host: str, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [LTM, "auth", host, *extra],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=cli.env,
            text=True,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, pattern: re.Pattern[str], timeout: float = scaled(30)) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        for line in self.lines:
            if found := pattern.search(line):
                return found
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            if found := pattern.search(line):
                return found
        self.kill()
        raise AssertionError(f"ltm auth never printed {pattern.pattern!r}:\n" + self.output())

    def code(self) -> str:
        return self.wait_for(CODE_LINE).group(1)

    def url(self) -> str:
        return self.wait_for(URL_LINE).group(1)

    def finish(self, timeout: float = scaled(60)) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("ltm auth did not finish:\n" + self.output()) from None
        self._reader.join(timeout=scaled(5))
        while True:
            try:
                line = self._queue.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self.lines.append(line)
        return code

    def output(self) -> str:
        return "\n".join(self.lines)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=scaled(10))


# -- the device flow over HTTP, as a device and a person drive it ---------------------------


def authorize(server: Server, **form: str) -> dict[str, Any]:
    r = httpkit.post(
        server.url + "/oauth/authorize_device",
        data={"client_id": "ltm-cli", "scope": "read write", **form},
        headers={"User-Agent": "ltm-test/1.0"},
    )
    assert r.status_code == 200, r.text
    return r.json()


def poll(server: Server, device_code: str, **form: str) -> httpx.Response:
    data = {"grant_type": GRANT, "device_code": device_code, "client_id": "ltm-cli", **form}
    return httpkit.post(server.url + "/oauth/token", data=data)


def approve(server: Server, token: str, code: str, **extra: Any) -> httpx.Response:
    return httpkit.post(
        server.url + "/v1/device/approve",
        json={"user_code": code, **extra},
        headers={"Authorization": f"Bearer {token}"},
    )


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page
    return found.group(1)
