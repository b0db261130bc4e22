"""Cora citation graph, Planetoid public split (bundled): :func:`load_cora`."""

from __future__ import annotations

import numpy as np

from nnjit.datasets.graph_dataset import GraphDataset
from nnjit.datasets.packaged import read_npz


_CORA_DESCRIPTION = """\
Cora citation graph, Planetoid public split (the same data as PyG Planetoid('Cora')):
2708 papers, 5278 undirected citation links stored in both directions (10556 columns of
edge_index, no self-loops, no duplicates, sorted by (row, col)), 1433 binary bag-of-words
features (x float32 in {0, 1}, NOT row-normalised), 7 classes.
train_mask: 140 nodes (0..139, 20 per class); val_mask: 500 nodes (140..639);
test_mask: 1000 nodes (all in 1708..2707).
Source: kimiyoung/planetoid data/ind.cora.* converted with the steps of PyG's
read_planetoid_data.
Licence: Planetoid repository MIT, (c) 2016 Zhilin Yang. Cite: Z. Yang, W. W. Cohen,
R. Salakhutdinov, "Revisiting Semi-Supervised Learning with Graph Embeddings", ICML 2016;
underlying data: A. McCallum et al., Information Retrieval 2000, and P. Sen et al.,
"Collective classification in network data", AI Magazine 2008."""

#: Cora class names in Planetoid's label order. The raw Planetoid files carry no names; this
#: is the mapping commonly used with PyG's Planetoid('Cora'), and it matches the per-class
#: sizes of the LINQS ``cora.content`` (label 0..6 have 351, 217, 418, 818, 426, 298, 180 nodes).
_CORA_CLASSES = (
    "Theory",
    "Reinforcement_Learning",
    "Genetic_Algorithms",
    "Neural_Networks",
    "Probabilistic_Methods",
    "Case_Based",
    "Rule_Learning",
)


def load_cora() -> GraphDataset:
    """Cora citation graph with the Planetoid public split (as PyG ``Planetoid('Cora')``).

    Returns a :class:`GraphDataset` with

    * ``x`` float32 ``(2708, 1433)``, binary bag-of-words, **not** row-normalised;
    * ``y`` int64 ``(2708,)`` in ``0..6`` (``target_names``: Theory, Reinforcement_Learning,
      Genetic_Algorithms, Neural_Networks, Probabilistic_Methods, Case_Based, Rule_Learning);
    * ``edge_index`` int64 ``(2, 10556)``: 5278 undirected edges stored in both directions,
      no self-loops, no duplicates, sorted by (row, col);
    * ``train_mask`` / ``val_mask`` / ``test_mask`` bool ``(2708,)`` with 140 / 500 / 1000 nodes.

    Source: ``kimiyoung/planetoid`` ``data/ind.cora.*``, converted like PyG's
    ``read_planetoid_data``. Licence: MIT (Planetoid repository, (c) 2016 Zhilin Yang).
    Cite: Z. Yang, W. W. Cohen, R. Salakhutdinov, "Revisiting Semi-Supervised Learning with
    Graph Embeddings", ICML 2016; P. Sen et al., "Collective classification in network
    data", AI Magazine 2008.

    Fresh writeable arrays on every call.
    """
    d = read_npz("cora.npz")
    return GraphDataset(
        x=d["x"].astype(np.float32, copy=False),
        y=d["y"].astype(np.int64, copy=False),
        edge_index=d["edge_index"].astype(np.int64, copy=False),
        train_mask=d["train_mask"].astype(bool, copy=False),
        val_mask=d["val_mask"].astype(bool, copy=False),
        test_mask=d["test_mask"].astype(bool, copy=False),
        target_names=_CORA_CLASSES,
        name="cora",
        description=_CORA_DESCRIPTION,
    )
