"""What a fit does for ``stateful=True`` recurrent layers (truncated backpropagation through time).

Such a layer carries each training batch's final states into the next batch (row ``i`` of a
batch continues row ``i`` of the batch before; :class:`nnjit.nn.recurrent.RNNBase`). So a fit of a
model holding one refuses shuffled batches, naming the argument and the layer, and starts every
epoch from zero states: the epoch reads the series from their beginnings again. The reset is a
callback, so such a fit runs its epochs one compiled call at a time.
"""

from __future__ import annotations

from nnjit.train.callbacks import Callback


def stateful_layers(model) -> list[tuple[str, object]]:
    """``(name, layer)`` of every ``stateful=True`` layer in ``model``."""
    return [(name, m) for name, m in model.named_modules() if getattr(m, "stateful", False) is True]


class ResetStatefulLayers(Callback):
    """Zero the carried states of the fitted model's stateful layers at each epoch's start. It
    finds them on ``trainer.model`` every time: a set-up (and this callback with it) may be
    reused by a later trainer of another model of the same structure."""

    def on_epoch_begin(self, trainer, epoch, logs=None):
        for _, layer in stateful_layers(trainer.model):
            layer.reset_states()


def stateful_fit_callbacks(model, train, callbacks) -> list | None:
    """``callbacks`` with :class:`ResetStatefulLayers` added when ``model`` has stateful layers
    (``callbacks`` as given otherwise).

    Raises:
        ValueError: the training batches are shuffled; names the argument and the layer.
    """
    layers = stateful_layers(model)
    if not layers:
        return callbacks
    name, layer = layers[0]
    if getattr(train, "shuffle", False):
        raise ValueError(
            f"fit: shuffle=True reorders the batches, but {type(layer).__name__} "
            f"'{name or 'model'}' is stateful=True (row i of each batch continues row i of the "
            "batch before): pass shuffle=False, or a DataLoader(shuffle=False)")
    return [*(callbacks or []), ResetStatefulLayers()]
