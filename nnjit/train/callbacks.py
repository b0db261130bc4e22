"""Callbacks: Python code that runs between compiled epochs.

A fit with callbacks runs one compiled call per epoch and calls the hooks in between; without
callbacks the whole fit is one compiled call. Hooks receive the trainer (Lightning style) and
``logs``, the epoch's history row as a dict (``epoch, train_loss, train_accuracy, val_loss,
val_accuracy, lr, seconds``). A hook stops training by returning ``False`` from
``on_epoch_end`` or by setting ``trainer.stop_training = True`` (Keras style). Epoch numbers
are absolute and 1-based: a fit with ``initial_epoch=5`` starts with epoch 6 (Keras style).
A callback whose counters must survive a resume returns them from :meth:`Callback.state`.
"""

from __future__ import annotations


class Callback:
    """Base class; every hook does nothing by default."""

    def on_train_begin(self, trainer, logs: dict | None = None) -> None:
        """Once, before the first epoch of ``fit`` (after the model is compiled)."""

    def on_epoch_begin(self, trainer, epoch: int, logs: dict | None = None) -> None:
        """Before epoch ``epoch`` (1-based) starts."""

    def on_epoch_end(self, trainer, epoch: int, logs: dict) -> bool | None:
        """After epoch ``epoch`` (1-based) was trained and validated; ``logs`` holds its row.

        Runs before the best weights are restored at the end of training, so a checkpoint
        written here holds the epoch's own weights. Return ``False`` to stop training.
        """

    def on_train_end(self, trainer, logs: dict | None = None) -> None:
        """Once, after training stopped and the best weights (if any) were restored."""

    def state(self) -> dict | None:
        """What an exact resume of this callback needs (``None``: nothing). Checkpoints written
        during a fit store it (:meth:`Trainer.save_checkpoint`): a dict of numbers (``inf``
        allowed), strings, bools and NumPy arrays."""
        return None

    def load_state(self, state: dict) -> None:
        """Take back what :meth:`state` returned; called after :meth:`on_train_begin` when a
        fit continues (``initial_epoch``) from a checkpoint saved by the same callback class."""


class LambdaCallback(Callback):
    """Wrap a plain callable ``f(history_dataframe)`` run after every epoch (False stops)."""

    def __init__(self, fn):
        if not callable(fn):
            raise TypeError(f"callbacks must be Callback instances or callables, got "
                            f"{type(fn).__name__}")
        self.fn = fn

    def on_epoch_end(self, trainer, epoch, logs):
        return self.fn(trainer.history_)


class CallbackList(Callback):
    """Several callbacks run in order; itself a :class:`Callback`."""

    def __init__(self, callbacks=()):
        self.callbacks = [c if isinstance(c, Callback) else LambdaCallback(c) for c in callbacks]

    def __bool__(self) -> bool:
        return bool(self.callbacks)

    def on_train_begin(self, trainer, logs=None):
        for c in self.callbacks:
            c.on_train_begin(trainer, logs)

    def on_epoch_begin(self, trainer, epoch, logs=None):
        for c in self.callbacks:
            c.on_epoch_begin(trainer, epoch, logs)

    def on_epoch_end(self, trainer, epoch, logs):
        keep_going = True
        for c in self.callbacks:  # every callback sees every epoch, even after a stop request
            if c.on_epoch_end(trainer, epoch, logs) is False:
                keep_going = False
        return keep_going

    def on_train_end(self, trainer, logs=None):
        for c in self.callbacks:
            c.on_train_end(trainer, logs)
