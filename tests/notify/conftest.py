"""Local receivers for notifications: an SMTP server and a chat webhook, both on loopback.

Real servers, not mocks: the SMTP provider's hook and the HTTP provider's hook talk to them over
TCP exactly as they would to a mail relay or a chat service.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from email import message_from_bytes, policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from demo import demo_include
from tests.support.ports import free_port

PROJECT_INCLUDE = Path(__file__).resolve().parents[2] / "include"


class WebhookReceiver:
    """A loopback HTTP server that keeps every JSON body POSTed to it."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                received.bodies.append(json.loads(self.rfile.read(length) or b"{}"))
                received.paths.append(self.path)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:  # quiet test output
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class SmtpSink:
    """An aiosmtpd server on loopback that keeps every message it accepts."""

    def __init__(self) -> None:
        from aiosmtpd.controller import Controller

        self.messages: list[Any] = []
        sink = self

        class Handler:
            # aiosmtpd's hook name.
            async def handle_DATA(  # noqa: N802
                self, server: Any, session: Any, envelope: Any
            ) -> str:
                parsed = message_from_bytes(envelope.content, policy=policy.default)
                sink.messages.append((envelope.rcpt_tos, parsed))
                return "250 Message accepted"

        self.port = free_port()
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def texts(self) -> list[str]:
        """Subject and body of every message, as text."""
        out = []
        for _, msg in self.messages:
            part = msg.get_body(preferencelist=("html", "plain"))
            out.append(f"{msg['subject']}\n{part.get_content() if part else ''}")
        return out

    def stop(self) -> None:
        self.controller.stop()


@pytest.fixture
def webhook() -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver()
    try:
        yield receiver
    finally:
        receiver.stop()


@pytest.fixture
def smtp_sink() -> Iterator[SmtpSink]:
    sink = SmtpSink()
    try:
        yield sink
    finally:
        sink.stop()


@pytest.fixture
def notify_include(tmp_path, monkeypatch) -> Callable[..., Path]:
    """``write(settings)``: an include folder with the project's files and this
    ``notifications.yaml``, made the include folder of this test and its subprocesses."""

    def write(settings: dict[str, Any]) -> Path:
        folder = tmp_path / "include"
        if not folder.exists():
            demo_include(PROJECT_INCLUDE, folder)  # the sandbox's desired offer state
        (folder / "notifications.yaml").write_text(yaml.safe_dump(settings))
        monkeypatch.setenv("AFFILIATE_NETWORK_INCLUDE_DIR", str(folder))
        return folder

    return write


@pytest.fixture
def chat_conn(monkeypatch, webhook) -> str:
    """``chat``: an HTTP connection whose host is the receiver's webhook URL (secret path)."""
    value = {"conn_type": "http", "host": f"{webhook.url}/hooks/T000/B000/not-a-real-secret"}
    monkeypatch.setenv("AIRFLOW_CONN_CHAT", json.dumps(value))
    return "chat"


@pytest.fixture
def smtp_conn(monkeypatch, smtp_sink) -> str:
    """``smtp_local``: an SMTP connection to the sink (plain SMTP on loopback, no retries; no
    login: the sink offers no AUTH without TLS)."""
    value = {
        "conn_type": "smtp",
        "host": "127.0.0.1",
        "port": smtp_sink.port,
        "extra": {
            "disable_tls": True,
            "disable_ssl": True,
            "from_email": "airflow@example.com",
            "retry_limit": 0,
            "timeout": 10,
        },
    }
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_LOCAL", json.dumps(value))
    return "smtp_local"
