"""A node-classification graph from a user's ``.npz`` file with Cora's layout:
:func:`load_graph_npz`."""

from __future__ import annotations

import os

import numpy as np

from nnjit.datasets.graph_dataset import GraphDataset

GRAPH_ARRAYS = ("x", "y", "edge_index", "train_mask", "val_mask", "test_mask")


def load_graph_npz(path) -> GraphDataset:
    """A node-classification graph from any ``.npz`` with Cora's layout: arrays ``x`` (N, F),
    ``y`` (N,), ``edge_index`` (2, E), ``train_mask``, ``val_mask``, ``test_mask`` (N,), and
    optionally ``target_names`` (strings). Read without pickle; validate it with
    :meth:`nnjit.data.graph.Graph.from_dataset`.

    Raises:
        FileNotFoundError: no such file. ValueError: not an npz archive, or arrays missing
            (the message names the file and lists them).
    """
    path = os.fspath(path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except FileNotFoundError:
        raise FileNotFoundError(f"load_graph_npz: no such file: {path}") from None
    except (ValueError, OSError) as e:
        raise ValueError(f"load_graph_npz: {path} is not a readable .npz archive ({e})") from None
    missing = [k for k in GRAPH_ARRAYS if k not in arrays]
    if missing:
        raise ValueError(f"load_graph_npz: {path} lacks {', '.join(missing)} (it has "
                         f"{', '.join(sorted(arrays)) or 'no arrays'}; expected "
                         f"{', '.join(GRAPH_ARRAYS)})")
    y = arrays["y"]
    names = arrays.get("target_names")
    if names is None:
        names = tuple(str(k) for k in range(int(y.max()) + 1 if y.size else 0))
    return GraphDataset(
        x=arrays["x"], y=y, edge_index=arrays["edge_index"], train_mask=arrays["train_mask"],
        val_mask=arrays["val_mask"], test_mask=arrays["test_mask"],
        target_names=tuple(str(n) for n in names),
        name=os.path.splitext(os.path.basename(path))[0], description=f"graph from {path}")
