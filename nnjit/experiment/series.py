"""Generated time series for sequence runs: ``data: sine_series`` in a run config.

Nothing is downloaded or bundled: the series is made the same way every time (its own fixed
seed, whatever the run's). :func:`sine_windows` cuts it into windows, each the input of a
one-step-ahead forecast, flattened into a row of ``window * channels`` values step by step (the
row a ``kind: gru`` net with ``in_shape: [window, channels]`` reads as its time steps); the
target is the next step's ``channels`` values. The windows overlap, so :func:`load_series`
splits them in time (the last ones validate), never at random: a random split would validate on
windows the training ones nearly contain.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SERIES_SOURCES", "load_series", "sine_windows"]

#: Periods (in steps) of the sine_series channels.
PERIODS = (25.0, 40.0, 70.0)


def sine_windows(length: int = 3000, window: int = 48, noise: float = 0.05, seed: int = 0):
    """``(X (N, window * channels) float32, y (N, channels) float32)``: windows of a series of
    ``length`` steps whose channels are sines of :data:`PERIODS` plus Gaussian noise, each with
    the next step as its target (``N = length - window - 1``)."""
    rng = np.random.default_rng(seed)
    t = np.arange(length)[:, None]
    series = np.sin(2 * np.pi * t / np.array(PERIODS)) + rng.normal(0, noise, (length,
                                                                             len(PERIODS)))
    series = series.astype(np.float32)
    starts = np.arange(length - window - 1)
    X = series[starts[:, None] + np.arange(window)]  # (N, window, channels)
    return X.reshape(len(starts), -1), series[starts + window]


#: Generated data sets a run config names: ``data: NAME`` -> ``(X, y)`` maker.
SERIES_SOURCES = {"sine_series": sine_windows}


def load_series(spec: str, regression: bool, val: float = 0.15):
    """``(X_train, y_train, X_val, y_val)`` of the generated series ``spec`` (a
    :data:`SERIES_SOURCES` name), the last ``val`` fraction of the windows validating.

    Raises:
        ValueError: a classification run (these are forecasts: ``loss: mse``).
    """
    if not regression:
        raise ValueError(f"data {spec!r} is a forecasting (regression) series: the run needs "
                         "model.loss: mse")
    X, y = SERIES_SOURCES[spec]()
    cut = len(X) - int(np.ceil(len(X) * val))
    return X[:cut], y[:cut], X[cut:], y[cut:]
