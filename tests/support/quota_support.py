"""What the quota store tests run against: a private redis-server, a trickling HTTP server, and
worker processes that send reporting requests through the transport.

The servers play the infrastructure (Redis, the network); our code runs unmocked in separate
processes, configured through its own parameters.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


class RedisServer:
    """A redis-server of its own on a loopback port, without persistence (a restart forgets
    everything), stopped and started by its PID."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed")
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        log = (self.workdir / "redis.log").open("ab")
        self.proc = subprocess.Popen(
            [
                *(self.binary, "--port", str(self.port), "--bind", "127.0.0.1"),
                *("--save", "", "--appendonly", "no", "--dir", str(self.workdir)),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 20
        while True:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock,
            ):
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)  # a crash: nothing saved, nothing flushed
            self.proc.wait(timeout=10)
        self.proc = None


@contextlib.contextmanager
def redis_server(workdir: Path) -> Iterator[RedisServer]:
    server = RedisServer(workdir)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class TrickleServer(http.server.ThreadingHTTPServer):
    """Answers every request 200 with a JSON body sent a byte at a time, ``step_s`` apart, over
    ``trickle_s``; counts the requests in flight at once."""

    daemon_threads = True

    def __init__(self, trickle_s: float, step_s: float = 0.2) -> None:
        super().__init__(("127.0.0.1", 0), _TrickleHandler)
        self.trickle_s = trickle_s
        self.step_s = step_s
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.started = 0
        self.served: list[tuple[float, float]] = []  # (start, end), monotonic

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _TrickleHandler(http.server.BaseHTTPRequestHandler):
    server: TrickleServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        srv = self.server
        with srv.lock:
            srv.in_flight += 1
            srv.started += 1
            srv.max_in_flight = max(srv.max_in_flight, srv.in_flight)
        start = time.monotonic()
        steps = max(3, int(srv.trickle_s / srv.step_s))
        body = b'{"ok":' + b" " * (steps - 2) + b"1}"
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            for i in range(len(body) - 1):
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
                time.sleep(srv.step_s)
        finally:
            # Counted out before the last byte: once the client has it, the request is over.
            with srv.lock:
                srv.in_flight -= 1
                srv.served.append((start, time.monotonic()))
        self.wfile.write(body[-1:])
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def trickle_server(trickle_s: float, step_s: float = 0.2) -> Iterator[TrickleServer]:
    server = TrickleServer(trickle_s, step_s)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


#: A worker process: sends reporting requests through the transport and a shared budget with a
#: reporting cap of 1 until the stop file exists (or ``count`` were answered); prints a JSON
#: line per outcome.
WORKER = r"""
import json, logging, random, sys, time
from pathlib import Path
sys.path.insert(0, {plugins!r})
from affiliate_network.exceptions import QuotaStoreError
from affiliate_network.hooks._budget import FileStore, QuotaSettings, RedisStore, SharedBudget
from affiliate_network.hooks._ratelimit import RateLimitThrottle
from affiliate_network.hooks._retry import RetryPolicy
from affiliate_network.hooks._transport import Request, Transport

cfg = json.loads(sys.argv[1])
if cfg["redis_url"]:
    store = RedisStore(cfg["redis_url"], cfg["scope"], restart_grace_s=cfg["grace_s"])
else:
    store = FileStore(cfg["quota_dir"], cfg["scope"])
settings = QuotaSettings(reporting_concurrency=1, rate_limit=10000, window_s=1.0)
budget = SharedBudget(store, settings, "network", slot_ttl_s=cfg["slot_ttl_s"])
transport = Transport(
    base_url=cfg["base_url"], api_key="not-a-key", extras={{}}, adapter=None,
    throttle=RateLimitThrottle(enabled=False), budget=budget, sleep=time.sleep,
    clock=time.monotonic, rng=random.Random(), log=logging.getLogger("worker"),
)
request = Request(
    method="GET", path="/networks/reporting/slow", query=None, data=None, idempotent=True,
    reporting=True, granular=False, policy=RetryPolicy(max_attempts=1), timeout_s=cfg["timeout_s"],
)
print("ready", flush=True)
go, stop = Path(cfg["go"]), Path(cfg["stop"])
while not go.exists():
    time.sleep(0.005)
answered = 0
while not stop.exists() and answered < cfg["count"]:
    try:
        reply = transport.send(request)
        answered += 1
        print(json.dumps({{"status": reply.status}}), flush=True)
    except QuotaStoreError as exc:
        print(json.dumps({{"error": type(exc).__name__}}), flush=True)
        time.sleep(0.05)
print(json.dumps({{"done": answered}}), flush=True)
"""


class Workers:
    """Worker processes started together (each says ready, then all go at once)."""

    def __init__(self, tmp: Path, n: int, **cfg: Any) -> None:
        self.go, self.stop_file = tmp / "go", tmp / "stop"
        cfg = {"go": str(self.go), "stop": str(self.stop_file), **cfg}
        script = WORKER.format(plugins=str(ROOT / "plugins"))
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-c", script, json.dumps(cfg)],
                stdout=subprocess.PIPE,
                text=True,
                env=os.environ.copy(),
            )
            for _ in range(n)
        ]
        for proc in self.procs:
            assert proc.stdout is not None
            for line in proc.stdout:  # import warnings may come first
                if line.strip() == "ready":
                    break
            else:
                raise RuntimeError("a worker did not start")
        self.go.touch()

    def finish(self, timeout: float = 120, *, stop: bool = True) -> list[list[dict[str, Any]]]:
        """Each worker's outcome lines: told to stop (those still waiting for a slot are ended
        after a second), or not (each ends after its ``count``)."""
        if stop:
            self.stop_file.touch()
            time.sleep(1.0)
            self.kill()
        outs = []
        for proc in self.procs:
            out, _ = proc.communicate(timeout=timeout)
            outs.append([json.loads(x) for x in out.splitlines() if x.startswith("{")])
        return outs

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
