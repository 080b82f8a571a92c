"""The landed format on Airflow's object storage: bases given as text become
:class:`ObjectStoragePath` here, so a URL may name an Airflow connection
(``s3://<conn id>@<bucket>/...``). Everything else is :mod:`affiliate_network.partitions`.
"""

from __future__ import annotations

import os

from airflow.sdk import ObjectStoragePath

from affiliate_network.partitions import manifest

StorageInput = str | os.PathLike[str] | ObjectStoragePath


def as_storage_path(base: StorageInput) -> ObjectStoragePath:
    """An :class:`ObjectStoragePath` for a local path or URL (``s3://bucket/x``, ``file:///x``)."""
    if isinstance(base, ObjectStoragePath):
        return base
    return ObjectStoragePath(os.fspath(base))


def partition_path(base: StorageInput, dataset: str, **keys: str) -> ObjectStoragePath:
    """``<base>/<dataset>/k1=v1/k2=v2`` (keys in the order given)."""
    path = as_storage_path(base) / dataset
    for key, value in keys.items():
        path = path / f"{key}={value}"
    return path


def partition_files(base: StorageInput, dataset: str) -> list[str]:
    """Every data file the complete partitions' manifests name, as paths or URLs for a query
    engine (:func:`affiliate_network.partitions.manifest.partition_files`).

    :param base: output base (local path or URL, ``s3://<conn id>@<bucket>/...``).
    :param dataset: dataset folder under ``base``.
    """
    return manifest.partition_files(as_storage_path(base), dataset)
