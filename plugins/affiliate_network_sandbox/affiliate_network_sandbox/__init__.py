"""A local, stateful implementation of the affiliate network API for tests, demos and DAG work.

Start it with ``affiliate-network-sandbox --port 8400`` (or ``python -m
affiliate_network_sandbox``) or, from Python/pytest, with
:func:`affiliate_network_sandbox.testing.start_sandbox`. See ``README.md`` beside this folder
(the distribution's readme).
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app"]


def create_app(*args: Any, **kwargs: Any) -> Any:
    """Build the ASGI app (imported lazily so importing the package stays cheap)."""
    from affiliate_network_sandbox.app import create_app as _create

    return _create(*args, **kwargs)
