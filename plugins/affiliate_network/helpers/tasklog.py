"""The logger interface the hook and the job libraries write to.

Two kinds of logger reach them: a task's logger (``BaseOperator.log`` / ``BaseHook.log``, Airflow's
structlog-based ``Logger``) and a stdlib :class:`logging.Logger` (the command lines, plain scripts,
tests). Both fit :class:`TaskLog`, so a job library is typed without naming either (and without
importing Airflow).
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["TaskLog"]


class TaskLog(Protocol):
    """The calls our code makes on a logger: %-style messages from debug to error."""

    def debug(self, msg: str, /, *args: object) -> object:
        """Log ``msg % args`` at DEBUG."""

    def info(self, msg: str, /, *args: object) -> object:
        """Log ``msg % args`` at INFO."""

    def warning(self, msg: str, /, *args: object) -> object:
        """Log ``msg % args`` at WARNING."""

    def error(self, msg: str, /, *args: object) -> object:
        """Log ``msg % args`` at ERROR."""
