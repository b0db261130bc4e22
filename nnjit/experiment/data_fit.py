"""Does a config's network fit its data? Checked before a run folder is made, so a misfit fails
with the setting to change instead of leaving an untrained run behind."""

from __future__ import annotations

import numpy as np

from nnjit.experiment.config import RunConfig
from nnjit.experiment.enums import Losses

__all__ = ["check_data_fits"]


def check_data_fits(config: RunConfig, X, y, y_val, spec: str) -> None:
    """ValueError when ``config``'s network does not fit the data ``spec`` (input width, classes
    of a cross-entropy run, targets of an MSE run), naming the setting and the value to set.
    ``X`` is an array of rows or a :class:`~nnjit.data.graph.Graph`."""
    from nnjit.data.graph import Graph

    net, loss = config.model.net, config.model.loss
    graph = isinstance(X, Graph)
    width = X.num_features if graph else int(np.prod(np.shape(X)[1:]))

    def misfit(setting: str, has: str, value: int) -> ValueError:
        return ValueError(f"model.net.{setting} is {getattr(net, setting)} but the data {spec} "
                          f"have {value} {has}; set {setting}: {value}")

    if net.in_dim != width:
        raise misfit("in_dim", "input features", width)
    if loss is Losses.CROSS_ENTROPY:
        classes = X.num_classes if graph else int(max(np.max(y), np.max(y_val, initial=-1))) + 1
        if net.out_dim != classes:
            raise misfit("out_dim", "classes", classes)
    elif loss is Losses.MSE and not graph:
        targets = np.asarray(y).reshape(len(y), -1).shape[1]
        if net.out_dim != targets:
            raise misfit("out_dim", "regression targets", targets)
