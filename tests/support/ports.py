"""A free loopback port (the one helper every local server of the tests starts on)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released: the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
