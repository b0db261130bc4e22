"""The dense layers every config net ends with: :func:`dense_stack`."""

from __future__ import annotations

from nnjit.nn.sequential import Sequential


def dense_stack(in_features: int, config) -> Sequential:
    """``Linear - activation [- Dropout]`` for each of ``config.hidden_dims``, then the output
    ``Linear`` to ``config.out_dim``, from ``in_features`` inputs: the MLP itself, and the head
    of the CNN and recurrent nets (:class:`~nnjit.experiment.NetConfig`'s ``init``,
    ``activation`` and ``dropout``)."""
    from nnjit import nn

    dims = (in_features, *config.hidden_dims)
    layers = []
    for d_in, d_out in zip(dims[:-1], dims[1:], strict=True):
        layers += [nn.Linear(d_in, d_out, init=config.init), config.activation()]
        if config.dropout > 0:
            layers.append(nn.Dropout(config.dropout))
    layers.append(nn.Linear(dims[-1], config.out_dim, init=config.init))
    return Sequential(*layers)
