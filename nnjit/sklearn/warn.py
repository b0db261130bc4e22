"""Warnings raised where scikit-learn's MLP raises them.

scikit-learn warns from inside ``sklearn.neural_network._multilayer_perceptron`` (its solvers),
so ``warnings.filterwarnings(..., module="sklearn")`` and the warning's file and line name its
code. nnjit's solvers are called from that code too (its ``_fit`` calls ``_fit_stochastic`` /
``_fit_lbfgs``): :func:`warn` attributes a warning to the nearest scikit-learn frame up the
stack, so filters and the reported location behave as with scikit-learn's estimators.
"""

from __future__ import annotations

import sys
import warnings


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn(message, category)`` with the stack level of the nearest caller in a
    ``sklearn.*`` module (the caller itself when there is none)."""
    frame, level = sys._getframe(1), 2  # (stacklevel 2: this function's caller)
    while frame is not None and not frame.f_globals.get("__name__", "").startswith("sklearn."):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level if frame is not None else 2)
