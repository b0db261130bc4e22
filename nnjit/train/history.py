"""The fit history as a pandas DataFrame that is built on first use, through public API only.

A fit returns its history as a DataFrame, but pandas' public constructor takes 80-95 us for a
17-epoch history (a quarter of a whole Iris fit; docs/performance.md), which a script that never
looks at the history should not pay. :func:`history_frame` returns an instance of a DataFrame
subclass that holds only the compiled loop's float64 history rows. The first attribute access of
any kind (``len``, ``[]``, ``.attrs``, ``repr``, pickling, ...) runs ``pandas.DataFrame``'s own
``__init__`` on it with the columns, sets ``.attrs``, and reassigns its ``__class__`` to
``pandas.DataFrame`` (Python's class assignment; no pandas internals are touched): from then on
it is a plain DataFrame built by pandas' public constructor. Before that, only ``type(frame)``
shows the difference, and ``isinstance(df, type(frame))`` holds for any DataFrame ``df``, so
``pandas.testing.assert_frame_equal`` accepts it on either side.
"""

from __future__ import annotations

import functools

import numpy as np

from nnjit.engine import fields

_PENDING = "_nnjit_pending_history"  # instance attribute holding the rows until first use


def history_frame(rows: np.ndarray, classification: bool, attrs):
    """A DataFrame of ``rows`` (n, len(HISTORY_COLUMNS)) float64, built when first used.

    ``rows`` must not change before then (they are copied when built); ``epoch`` becomes
    int64 and, for regression, the accuracy columns NaN. ``attrs`` becomes ``frame.attrs``: a
    dict, or a function that returns it, called when the frame is built.
    """
    cls = _lazy_type()
    frame = cls.__new__(cls)
    object.__getattribute__(frame, "__dict__")[_PENDING] = (rows, classification, attrs)
    return frame


#: Positions of the float columns in the history rows (all but ``epoch``, an int64 column).
_VALUE_INDEX = [i for i in range(len(fields.HISTORY_COLUMNS)) if i != fields.H_EPOCH]
_ACCURACY_POSITIONS = [_VALUE_INDEX.index(fields.H_TRAIN_ACC), _VALUE_INDEX.index(fields.H_VAL_ACC)]


def _values_and_epochs(rows: np.ndarray, classification: bool):
    """Copies of ``rows``' float columns (accuracies NaN for regression) and its epochs, int64."""
    values = rows[:, _VALUE_INDEX]  # fancy indexing: a fresh array
    if not classification:  # accuracy is undefined for regression
        values[:, _ACCURACY_POSITIONS] = np.nan
    return values, rows[:, fields.H_EPOCH].astype(np.int64)


@functools.cache
def _value_columns():
    """The float columns' index, built once (pandas indexes are immutable and shareable)."""
    import pandas as pd

    return pd.Index([fields.HISTORY_COLUMNS[i] for i in _VALUE_INDEX])


def _fill(frame, rows: np.ndarray, classification: bool) -> None:
    """Run pandas' public ``DataFrame.__init__`` on ``frame`` with the history's columns.

    One 2-D float block plus an inserted int64 ``epoch`` column: about 40% cheaper than the
    constructor from a dict of columns.
    """
    import pandas as pd

    values, epochs = _values_and_epochs(rows, classification)
    pd.DataFrame.__init__(frame, values, columns=_value_columns(), copy=False)
    frame.insert(fields.H_EPOCH, fields.HISTORY_COLUMNS[fields.H_EPOCH], epochs)


def build_frame(rows: np.ndarray, classification: bool):
    """The plain DataFrame of ``rows`` (copies them), built at once."""
    import pandas as pd

    values, epochs = _values_and_epochs(rows, classification)
    frame = pd.DataFrame(values, columns=_value_columns(), copy=False)
    frame.insert(fields.H_EPOCH, fields.HISTORY_COLUMNS[fields.H_EPOCH], epochs)
    return frame


@functools.cache
def _lazy_type():
    import pandas as pd

    class Meta(type(pd.DataFrame)):
        def __instancecheck__(cls, obj):  # every DataFrame passes ``isinstance(df, type(lazy))``
            return isinstance(obj, pd.DataFrame)

    class LazyHistoryFrame(pd.DataFrame, metaclass=Meta):
        """A ``pandas.DataFrame`` whose contents are built on the first attribute access."""

        def __getattribute__(self, name):
            pending = object.__getattribute__(self, "__dict__").pop(_PENDING, None)
            if pending is not None:
                rows, classification, attrs = pending
                _fill(self, rows, classification)
                self.attrs = attrs() if callable(attrs) else attrs
                object.__setattr__(self, "__class__", pd.DataFrame)
                return getattr(self, name)  # now a plain DataFrame
            return object.__getattribute__(self, name)

    return LazyHistoryFrame
