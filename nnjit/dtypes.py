"""The arena dtypes: float32 by default, float64 on request."""

import numpy as np

#: Arena dtype used unless a model is compiled with ``dtype=np.float64``.
DEFAULT_DTYPE = np.dtype(np.float32)

SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def integer_dtype(dtype) -> np.dtype:
    """The integer dtype whose bits an integer slot holds in an arena of ``dtype``: int32 in
    float32 arenas, int64 in float64 arenas (indices never round-trip through float)."""
    return np.dtype(np.int32) if np.dtype(dtype).itemsize == 4 else np.dtype(np.int64)
