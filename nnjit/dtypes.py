"""The arena dtypes: float32 by default, float64 on request."""

import numpy as np

#: Arena dtype used unless a model is compiled with ``dtype=np.float64``.
DEFAULT_DTYPE = np.dtype(np.float32)

SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
