"""One model, several threads: every run on a model holds that model's lock.

A trainer's compiled runs (fit, predict, evaluate, gradients) use the program's one arena for
their activations, and the model's parameters are views into it; nnjit releases the GIL while
they run, so two threads running on one model at once overwrote each other's rows (wrong
predictions, changed fit weights, no error). Every run takes the model's lock (shared by all the
trainers of that model): concurrent predictions on one model are served one at a time and each
gets the single-thread answer. A fit marks the model as fitting: a predict, evaluate, gradients
or fit from another thread meanwhile raises :class:`TrainerBusyError` naming the fitting trainer
instead of waiting for a fit that may last hours; the fit's own thread (its callbacks) may still
predict between epochs. Threads that each use their own model run in parallel, unaffected.
"""

from __future__ import annotations

import threading


class TrainerBusyError(RuntimeError):
    """A run on a model while another thread fits it (or a second concurrent fit): refused."""


class _Guard:
    __slots__ = ("fitter", "fitting", "lock", "mutex")

    def __init__(self):
        self.lock = threading.RLock()  # held for each run; re-entered by a fit's callbacks
        self.mutex = threading.Lock()  # guards ``fitting``
        self.fitting: int | None = None  # the thread fitting the model
        # the trainer fitting it: a refused run names it (its repr, made only then)
        self.fitter = None

    def __reduce__(self):  # a copied or unpickled model is free: a new guard
        return _Guard, ()


def _guard(model) -> _Guard:
    # kept in the model's __dict__ (a dict lookup per run); a copy of the model gets its own
    guard = model.__dict__.get("_run_guard")
    if guard is None:
        guard = model.__dict__.setdefault("_run_guard", _Guard())  # (atomic: one per model)
    return guard


class exclusive:  # (lower case: used as a context manager, like a function)
    """``with exclusive(trainer, "predict"):`` one run on ``trainer.model``, alone; ``fit=True``
    marks the model as fitting for its duration (see the module's docstring)."""

    __slots__ = ("_fit", "_guard", "_marked", "_trainer", "_what")

    def __init__(self, trainer, what: str, fit: bool = False):
        self._trainer, self._what, self._fit = trainer, what, fit
        self._guard = _guard(trainer.model)
        self._marked = False

    def __enter__(self):
        guard, me = self._guard, threading.get_ident()
        fitting = guard.fitting  # (a fit marked after this read waits for this run's lock)
        if fitting is not None and fitting != me:
            self._refuse(guard.fitter)
        if self._fit:
            with guard.mutex:
                if guard.fitting is not None and guard.fitting != me:
                    self._refuse(guard.fitter)
                if guard.fitting is None:
                    guard.fitting, guard.fitter, self._marked = me, self._trainer, True
        try:
            guard.lock.acquire()  # (a run of another thread ends soon: a predict, not a fit)
        except BaseException:
            self._unmark()
            raise
        return self

    def __exit__(self, *exc):
        self._guard.lock.release()
        self._unmark()
        return False

    def _refuse(self, fitter):
        fitter = repr(fitter) if fitter is not None else "another trainer"
        raise TrainerBusyError(
            f"{self._what}: {fitter} is fitting this model in another thread; wait for that "
            f"fit to return, or use a copy of the model (copy.deepcopy) in this thread"
        )

    def _unmark(self) -> None:
        if self._marked:
            with self._guard.mutex:
                self._guard.fitting, self._guard.fitter = None, None
            self._marked = False
