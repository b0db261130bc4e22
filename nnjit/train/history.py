"""The fit history as a pandas DataFrame that is built on first use.

A fit returns its history as a DataFrame, but building one costs pandas work (about 15 us warm
and 90-160 us with cold CPU caches, a fifth of a whole Iris fit's Python set-up) that a script
which never looks at the history should not pay. :func:`history_frame` returns an
instance of a DataFrame subclass holding only the compiled loop's float64 history rows; the
first attribute access of any kind (``len``, ``[]``, ``.attrs``, ``repr``, ...) builds the real
frame in place and turns the object into a plain ``pandas.DataFrame``. Before that, only
``type(frame)`` shows the difference (and ``isinstance(df, type(frame))`` holds for any
DataFrame ``df``, so ``pandas.testing.assert_frame_equal`` accepts it on either side).
"""

from __future__ import annotations

import functools

import numpy as np

from nnjit.graph import interpreter as it

_BUILD = "_nnjit_build"  # instance attribute holding the pending rows


def history_frame(rows: np.ndarray, classification: bool, attrs: dict):
    """A DataFrame of ``rows`` (n, len(HISTORY_COLUMNS)) float64, built when first used.

    ``rows`` must not change afterwards; ``epoch`` becomes int64 and, for regression,
    the accuracy columns NaN. ``attrs`` becomes ``frame.attrs``.
    """
    cls = _lazy_type()
    frame = cls.__new__(cls)
    object.__getattribute__(frame, "__dict__")[_BUILD] = (rows, classification, attrs)
    return frame


def build_frame(rows: np.ndarray, classification: bool):
    """The plain DataFrame of ``rows`` (copies them)."""
    import pandas as pd

    n = rows.shape[0]
    arrays = [rows[:, i] for i in range(len(it.HISTORY_COLUMNS))]
    arrays[it.H_EPOCH] = arrays[it.H_EPOCH].astype(np.int64)
    if not classification:  # accuracy is undefined for regression
        arrays[it.H_TRAIN_ACC] = np.full(n, np.nan)
        arrays[it.H_VAL_ACC] = np.full(n, np.nan)
    try:  # pandas' own fast path: half the cost of the dict constructor (~35 us vs ~70 us)
        return pd.DataFrame._from_arrays(arrays, columns=_columns(), index=pd.RangeIndex(n),
                                         verify_integrity=False)
    except (AttributeError, TypeError):  # a pandas without it
        return pd.DataFrame(dict(zip(it.HISTORY_COLUMNS, arrays)), copy=False)


@functools.cache
def _columns():
    """The history's column index, built once (constructing a pandas Index costs ~40 us)."""
    import pandas as pd

    return pd.Index(it.HISTORY_COLUMNS)


@functools.cache
def _lazy_type():
    import pandas as pd

    class Meta(type(pd.DataFrame)):
        def __instancecheck__(cls, obj):  # every DataFrame passes ``isinstance(df, type(lazy))``
            return isinstance(obj, pd.DataFrame)

    class LazyHistoryFrame(pd.DataFrame, metaclass=Meta):
        """A ``pandas.DataFrame`` whose contents are built on the first attribute access."""

        def __getattribute__(self, name):
            pending = object.__getattribute__(self, "__dict__").pop(_BUILD, None)
            if pending is not None:
                rows, classification, attrs = pending
                mgr = build_frame(rows, classification)._mgr
                object.__setattr__(self, "__class__", pd.DataFrame)
                object.__setattr__(self, "_mgr", mgr)  # as NDFrame.__init__ does
                object.__setattr__(self, "_attrs", attrs)
                object.__setattr__(self, "_flags", pd.Flags(self, allows_duplicate_labels=True))
                return getattr(self, name)  # now a plain DataFrame
            return object.__getattribute__(self, name)

    return LazyHistoryFrame
