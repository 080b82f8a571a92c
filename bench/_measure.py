"""Resource figures every benchmark worker reports about its own process."""

from __future__ import annotations

import contextlib
import json
import resource
import subprocess
from typing import Any


def peak_rss_mb() -> float:
    """Peak resident set size of this process, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def cpu_self_s() -> float:
    """User + system CPU seconds used by this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def cpu_tree_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` and its live children (the sandbox's)."""
    import psutil

    proc = psutil.Process(pid)
    total = sum(proc.cpu_times()[:2])
    for child in proc.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            total += sum(child.cpu_times()[:2])
    return total


def run_worker(name: str, command: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run one contender's worker process; its result is the JSON on its last stdout line.

    :param name: the contender, named in the failure message.
    :param command: the worker's argv.
    :param env: the worker's environment.
    """
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{name} worker failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
