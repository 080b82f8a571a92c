"""Killing a child process at a chosen moment, for the crash-and-rerun tests."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable


def kill_when(
    proc: subprocess.Popen, ready: Callable[[], bool], *, within: float, early_exit: str
) -> None:
    """SIGKILL ``proc`` as soon as ``ready()`` holds; fail if it exits first or time runs out.

    :param proc: the child process (started by the test).
    :param ready: polled every 50 ms; true once the child reached the moment to die at.
    :param within: seconds ``ready`` may take.
    :param early_exit: assertion message when the child finished before it could be killed.
    """
    try:
        deadline = time.monotonic() + within
        while not ready():
            assert proc.poll() is None, early_exit
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
