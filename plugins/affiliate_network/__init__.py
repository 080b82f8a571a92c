"""Apache Airflow provider for an affiliate tracking network."""

from __future__ import annotations

from typing import Any

# The version lives with the provider metadata, so that module imports nothing back up.
from affiliate_network.provider_info import VERSION

__version__ = VERSION

__all__ = ["__version__", "get_provider_info"]


def get_provider_info() -> dict[str, Any]:
    """Provider metadata, read by Airflow through the ``apache_airflow_provider`` entry point."""
    from affiliate_network.provider_info import PROVIDER_INFO

    return PROVIDER_INFO
