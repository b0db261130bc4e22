"""The Trainer's checkpoints: ``save_checkpoint`` and ``load_checkpoint``.

What a checkpoint holds and how an untrusted file is checked is :mod:`nnjit.train.checkpoint`;
this is the trainer's side: which of its states go in (weights, optimizer, RNG and shuffle
order, the fit state, the callbacks' states) and how a loaded file is taken back, laid out or
not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from nnjit.io.nne import load_nne
from nnjit.train.checkpoint import read_checkpoint, write_checkpoint

if TYPE_CHECKING:
    from nnjit.nn.module import Module


class CheckpointMethods:
    """:class:`~nnjit.train.trainer.Trainer`'s checkpoint methods (a mixin: it reads and sets
    the trainer's ``model``, ``optimizer``, ``program``, RNG, shuffle order and fit state)."""

    def save_checkpoint(self, path, metadata: dict | None = None) -> None:
        """Write weights, optimizer state (moments, step count), RNG and shuffle state, the fit
        state (:meth:`fit_state`: epochs done, scheduler step, early-stopping counters, the
        plateau rule, the best-weights snapshot) and the current fit's callback states to a
        ``.nne`` file, with optional extra JSON ``metadata`` (e.g. the epoch).

        Loading it and calling ``fit(..., epochs=N, initial_epoch=<epochs done>)`` continues
        exactly where the fit was (bit for bit, same RNG and shuffle order)."""
        rng = self.program.rng if self.program is not None else self._pending_rng
        pending = self._resume  # loaded from a checkpoint and not fitted since: keep it
        write_checkpoint(self.model, path, optimizer=self.optimizer, rng_state=rng,
                         shuffle_order=self._perm, metadata=metadata,
                         fit_state=pending["fit"] if pending is not None else self.fit_state(),
                         callback_states=(pending["callbacks"] if pending is not None
                                          else self.callback_states()))

    def load_checkpoint(self, path) -> None:
        """Restore what :meth:`save_checkpoint` wrote; the model must have the same shape.

        The fit state and callback states are kept for the next ``fit(initial_epoch=...)``;
        a file without them (older nnjit) loads too, and that fit then starts early stopping
        and ReduceLROnPlateau afresh (the scheduler table still continues at
        ``initial_epoch * steps_per_epoch``).

        The file is untrusted: every field is checked (type, dtype, shape and range: the RNG
        state is a valid generator state, the shuffle order a permutation, counters whole and
        >= 0, ...) before anything changes, so a failed load leaves the trainer as it was.

        Raises:
            StateMismatchError: listing every missing, unexpected or mis-shaped parameter.
            NNEFormatError: the file is not a valid ``.nne`` file, or a field of the checkpoint
                is missing, of the wrong type, dtype or shape, or out of range, or the optimizer
                state is another optimizer's; the message names the file and the field.
            OSError: the file cannot be read (missing, permission denied).
        """
        saved = read_checkpoint(load_nne(path), self.model, self.optimizer)  # changes nothing
        if self.program is None:  # not laid out: hold the file's values at the arena's precision
            _promote_floats(self.model, self.dtype)
        self.model.load_state_dict(saved.params, where=str(path))
        if saved.optimizer_state is not None:
            self.optimizer.state = self.optimizer.cast_state(saved.optimizer_state, self.dtype)
            self.optimizer.iterations = saved.optimizer_iterations
        if saved.shuffle_order is not None:
            self._perm = np.array(saved.shuffle_order, dtype=np.int64)
        if saved.rng_state is not None:
            self._pending_rng = np.array(saved.rng_state, dtype=np.int64)
            if self.program is not None:
                self.program.rng[:] = self._pending_rng
        self._resume = {"fit": saved.fit, "callbacks": saved.callbacks}


def _promote_floats(model: Module, dtype: np.dtype) -> None:
    """Give ``model``'s float parameters and buffers the arena ``dtype`` before values are
    loaded into them: a float64 trainer's model is often built in float32, and loading a float64
    checkpoint into float32 arrays would round it before the layout copies it into the arena."""
    for tensor in [*model.parameters(), *model.buffers()]:
        if tensor.data.dtype.kind == "f" and tensor.data.dtype != dtype:
            tensor.data = tensor.data.astype(dtype)
