"""The landed format: partitions with a ``_manifest.json`` commit marker (no Airflow here).

Layout (Hive style, readable by DuckDB/Spark/pyarrow.dataset)::

    <base>/<dataset>/date=YYYY-MM-DD/part-00000.parquet   (or part-00000.jsonl.gz)
    <base>/<dataset>/date=YYYY-MM-DD/part-00001.parquet   (Parquet: one file per 250,000 rows)
    <base>/<dataset>/date=YYYY-MM-DD/_manifest.json
    <base>/<dataset>/date=YYYY-MM-DD/_changes-<ns>-<token>.json  (what a re-pull changed)
    <base>/<dataset>/_staging/...                          (in-flight writes; ignored by readers)
    <base>/<dataset>/_trash/...                            (replaced partitions being removed)

Rules a reader relies on:

* **A partition is complete if and only if it holds ``_manifest.json``** and the files it lists
  exist with the listed sizes (:func:`~.manifest.is_complete`, the one check). Query engines
  skip ``_``-prefixed paths, so in-flight data under ``_staging`` is never picked up by a glob.
* **Readers read exactly the files the manifest names** (:mod:`.read`,
  :func:`~.manifest.partition_files`).
* A rerun replaces the partition exactly, published in one step (:mod:`.publish`): a crash at
  any point leaves the previous complete partition (or none), never a half partition.
* Change-aware publishing (``commit(only_if_changed=True)``): a pull with the published content
  checksum publishes nothing; a changed one publishes a change record (:mod:`.changes`) with it.

Modules: :mod:`.manifest` (manifest, checksum, paths, completeness), :mod:`.write` (the
:class:`~.write.PartitionWriter`), :mod:`.publish` (local rename, object store), :mod:`.read`
(columns, row groups, streaming), :mod:`.changes` (change records).
"""
