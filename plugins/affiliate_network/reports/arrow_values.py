"""Arrow arrays and scalars built from their buffers, so the landing never imports pandas.

``pa.array``, ``pa.scalar`` and a compute function given a plain Python value all ask pyarrow's
pandas shim whether the value is a pandas object, and the shim imports pandas to answer, if it
is installed (it is in most Airflow images). That import is ~55 MB of resident memory in a task
process that never uses pandas: a fifth of the landing's whole budget (``bench/bench_report.py``).
Arrays built from buffers skip the question. ``tests/reports/test_landing_imports.py`` lands a
day in a fresh process and checks that pandas stayed out.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


def bool_array(values: Sequence[bool]) -> pa.Array:
    """A ``bool`` array without nulls (a filter mask)."""
    import numpy as np
    import pyarrow as pa

    bits = np.packbits(np.asarray(values, dtype=np.bool_), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])


def string_array(values: Sequence[bytes | None]) -> pa.Array:
    """A ``string`` array of UTF-8 ``values`` (``None``: null). The bytes are not re-validated:
    they come from a JSON parser, which only yields valid UTF-8."""
    import numpy as np
    import pyarrow as pa

    lengths = np.fromiter((0 if v is None else len(v) for v in values), np.int64, len(values))
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = pa.py_buffer(b"".join(v for v in values if v is not None))
    valid = np.fromiter((v is not None for v in values), np.bool_, len(values))
    nulls = len(values) - int(valid.sum())
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    # large_string when offsets pass 2 GiB (never for one page), then the usual string type.
    array = pa.Array.from_buffers(
        pa.large_string(), len(values), [validity, pa.py_buffer(offsets), data], null_count=nulls
    )
    return array.cast(pa.string()) if int(offsets[-1]) < 2**31 else array


@functools.cache
def null_scalar(type_: pa.DataType) -> pa.Scalar:
    """A null scalar of ``type_`` (for ``if_else`` and friends)."""
    import pyarrow as pa

    return pa.nulls(1, type_)[0]


@functools.cache
def int_scalar(value: int, type_: pa.DataType) -> pa.Scalar:
    """The integer ``value`` as a scalar of ``type_``."""
    import numpy as np
    import pyarrow as pa

    one = pa.Array.from_buffers(pa.int64(), 1, [None, pa.py_buffer(np.array([value], np.int64))])
    return one.cast(type_)[0]


@functools.cache
def empty_string_scalar() -> pa.Scalar:
    """The scalar ``""`` (the API's "no value" in string fields)."""
    import pyarrow as pa

    return pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(bytes(8)), pa.py_buffer(b"")])[
        0
    ]
