"""The recurrent network of ``NetConfig(kind="lstm" | "gru" | "rnn")``: :class:`RecurrentNet`.

A row of ``in_dim = steps * features`` values is a sequence of ``steps`` steps of ``features``
values each (``in_shape: [steps, features]``), as the usual "image rows as a sequence" models
read a picture: the Digits' 8x8 images as 8 steps of 8 pixels, a window of a series as its time
steps. The recurrent layer (``hidden_size``, ``num_layers``, ``bidirectional``, ``dropout``
between its layers, PyTorch's) reads the sequence; its top layer's final state (both directions
side by side) goes through ``hidden_dims`` (``Linear - activation [- Dropout]``) to the output
``Linear``, as ``nn.LSTM`` classifiers and forecasters usually end.
"""

from __future__ import annotations

from nnjit.experiment.dense_stack import dense_stack
from nnjit.nn.module import Module

#: Each recurrent kind's layer, by ``Nets`` value.
LAYERS = {"rnn": "RNN", "gru": "GRU", "lstm": "LSTM"}


class RecurrentNet(Module):
    """``rnn`` (an ``nn.LSTM``, ``nn.GRU`` or ``nn.RNN``) over rows viewed as ``in_shape`` =
    ``(steps, features)``, then ``head`` on the top layer's final state.

    Built from a :class:`~nnjit.experiment.NetConfig` by ``Nets.LSTM(config)`` (``GRU``,
    ``RNN``).
    """

    def __init__(self, config):
        super().__init__()
        from nnjit import nn

        self.in_shape = tuple(config.in_shape)
        steps, features = self.in_shape
        self.in_features = steps * features  # (a row's width, as summary() reads it)
        layer = getattr(nn, LAYERS[config.kind.value])
        self.rnn = layer(features, config.hidden_size, num_layers=config.num_layers,
                         batch_first=True, bidirectional=config.bidirectional,
                         dropout=config.dropout if config.num_layers > 1 else 0.0)
        directions = 2 if config.bidirectional else 1
        self.top = directions * config.hidden_size  # the top layer's state, every direction
        self.skip = (config.num_layers - 1) * self.top  # the lower layers' states before it
        self.is_lstm = config.kind.value == "lstm"
        self.head = dense_stack(self.top, config)

    def forward(self, x):
        _, state = self.rnn(x.view(-1, *self.in_shape))
        h_n = (state[0] if self.is_lstm else state).flatten()  # (batch, layers * top)
        if self.skip:
            h_n = h_n[:, self.skip:self.skip + self.top]
        return self.head(h_n)
