"""OpenLineage datasets of the package's operators (optional: the ``openlineage`` extra).

During ``execute`` an operator records what it read and wrote as plain namespace/name pairs
(:func:`api_endpoint_dataset`, :func:`storage_dataset`); once the task has finished, the
OpenLineage provider's ``DefaultExtractor`` calls
:meth:`OpenLineageMixin.get_openlineage_facets_on_complete` (and, with no ``_on_failure``
method, the same on a failed try) and turns them into the run event's inputs and outputs.

Naming follows the OpenLineage naming spec (https://openlineage.io/docs/spec/naming):

* the network's API: namespace ``<scheme>://<host>[:<port>]`` of the connection's base URL,
  name the endpoint's path with the version segment (``/v1/networks/reporting/conversions``).
  No credential is in either: the key travels in a header, never in the URL.
* a local file or folder: namespace ``file``, name its absolute path;
* an object store (``s3://``, ``gs://`` ...): namespace ``<scheme>://<bucket>``, name the key;
  any other URL: namespace ``<scheme>://<host>``, name its path.

Nothing here imports the provider at module level: without it installed nothing calls the
method, and the operators import this module at DAG parse time.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.generated.base import Dataset, OutputDatasetFacet, RunFacet

#: Endpoints the operators read or write (paths below the base URL's ``/v1``), as datasets.
CONVERSIONS_ENDPOINT = "/networks/reporting/conversions"
ENTITY_TABLE_ENDPOINT = "/affiliates/reporting/entity/table"
ONHOLD_ENDPOINT = "/networks/reporting/onhold"

#: Object stores whose dataset name is the key without a leading slash (like their providers').
_BUCKET_SCHEMES = frozenset({"s3", "s3a", "gs", "gcs", "abfs", "abfss", "wasbs"})


class LineageDataset(TypedDict):
    """One dataset as recorded during ``execute`` (JSON-able; no facet objects)."""

    namespace: str
    name: str
    #: Rows written (outputs only), reported as the ``outputStatistics`` facet.
    rows: NotRequired[int]


def api_endpoint_dataset(base_url: str, path: str) -> LineageDataset:
    """The API endpoint ``path`` under ``base_url`` as a dataset.

    :param base_url: the hook's base URL (``https://api.example.com/v1``).
    :param path: the endpoint below it (``/networks/reporting/conversions``); a path template
        (``/networks/conversions/{id}``) names an endpoint written record by record.
    """
    parts = urlsplit(base_url)
    # hostname/port, never netloc: a netloc may carry user:password@.
    host = parts.hostname or ""
    authority = f"{host}:{parts.port}" if parts.port else host
    name = parts.path.rstrip("/") + "/" + path.lstrip("/")
    return {"namespace": f"{parts.scheme}://{authority}", "name": name}


def storage_dataset(location: str, *, rows: int | None = None) -> LineageDataset:
    """A written file or folder (a local path or a storage URL) as a dataset.

    :param location: what the storage layer reports (``/data/x``, ``file:///data/x``,
        ``s3://bucket/x`` or ``s3://conn_id@bucket/x``: the connection id is dropped).
    :param rows: rows written, when known.
    """
    parts = urlsplit(location)
    if not parts.scheme or (parts.scheme == "file" and not parts.hostname):
        path = parts.path if parts.scheme else location
        ref: LineageDataset = {"namespace": "file", "name": os.path.abspath(path)}
    elif parts.scheme in _BUCKET_SCHEMES:
        ref = {"namespace": f"{parts.scheme}://{parts.hostname}", "name": parts.path.lstrip("/")}
    else:
        host = parts.hostname or ""
        authority = f"{host}:{parts.port}" if parts.port else host
        ref = {"namespace": f"{parts.scheme}://{authority}", "name": parts.path}
    if rows is not None:
        ref["rows"] = int(rows)
    return ref


class OpenLineageMixin:
    """``get_openlineage_facets_on_complete`` from the datasets recorded by ``execute``.

    Operators call :meth:`record_lineage` while they work (a rerun starts from nothing:
    ``execute`` begins with :meth:`reset_lineage`). What a failed try recorded before failing
    is reported too: those inputs were read and those outputs written.

    List it after the operator base (``class Op(AffiliateNetworkBaseOperator,
    OpenLineageMixin)``): first in the bases, Airflow's operator metaclass wraps the inherited
    ``__init__`` again and a mapped task's inlets come out as ``None``.
    """

    _lineage_inputs: list[LineageDataset]
    _lineage_outputs: list[LineageDataset]

    def reset_lineage(self) -> None:
        """Forget what an earlier execution of this instance recorded."""
        self._lineage_inputs = []
        self._lineage_outputs = []

    def record_lineage(
        self,
        *,
        inputs: Iterable[LineageDataset] = (),
        outputs: Iterable[LineageDataset] = (),
    ) -> None:
        """Add datasets read (``inputs``) and written (``outputs``); duplicates are kept once."""
        if not hasattr(self, "_lineage_inputs"):
            self.reset_lineage()
        for target, new in ((self._lineage_inputs, inputs), (self._lineage_outputs, outputs)):
            for ref in new:
                if ref not in target:
                    target.append(ref)

    @property
    def recorded_lineage(self) -> dict[str, list[LineageDataset]]:
        """``{"inputs": [...], "outputs": [...]}`` as recorded so far (copies)."""
        return {
            "inputs": list(getattr(self, "_lineage_inputs", [])),
            "outputs": list(getattr(self, "_lineage_outputs", [])),
        }

    def get_openlineage_facets_on_complete(
        self, task_instance: Any
    ) -> OperatorLineage[Dataset, RunFacet] | None:
        """The OpenLineage provider's hook: the recorded datasets as ``OperatorLineage``.

        :param task_instance: the finished task instance (unused: ``execute`` recorded all).
        :returns: ``None`` when the provider is not installed.
        """
        try:
            from airflow.providers.common.compat.openlineage.facet import (
                Dataset,
                OutputDataset,
                OutputStatisticsOutputDatasetFacet,
            )
            from airflow.providers.openlineage.extractors import OperatorLineage
        except ImportError:  # the extra is not installed: nothing to report to
            return None
        recorded = self.recorded_lineage
        inputs = [Dataset(namespace=d["namespace"], name=d["name"]) for d in recorded["inputs"]]
        outputs: list[Dataset] = []
        for d in recorded["outputs"]:
            facets: dict[str, OutputDatasetFacet] = {}
            if "rows" in d:
                facets["outputStatistics"] = OutputStatisticsOutputDatasetFacet(rowCount=d["rows"])
            outputs.append(
                OutputDataset(namespace=d["namespace"], name=d["name"], outputFacets=facets)
            )
        return OperatorLineage(inputs=inputs, outputs=outputs)
