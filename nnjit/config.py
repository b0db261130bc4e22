"""Package-wide constants: the compiler flag set and the default arena dtype."""

import numpy as np

#: LLVM fast-math flags used by every compiled function. Deliberately *not* fast-math "True":
#: that adds ``nnan``/``ninf``, under which LLVM folds ``isnan``/``isfinite`` to constants and
#: NaN detection (early stopping on divergence) silently stops working.
FASTMATH = frozenset({"nsz", "arcp", "contract", "afn", "reassoc"})

#: Arena dtype used unless a model is compiled with ``dtype=np.float64``.
DEFAULT_DTYPE = np.dtype(np.float32)

SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
