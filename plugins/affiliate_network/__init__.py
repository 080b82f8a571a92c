"""Apache Airflow provider for an affiliate tracking network."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def get_provider_info() -> dict[str, Any]:
    """Provider metadata, read by Airflow through the ``apache_airflow_provider`` entry point."""
    from affiliate_network.provider_info import PROVIDER_INFO

    return PROVIDER_INFO
