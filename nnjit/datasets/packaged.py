"""Reading the archives shipped in ``nnjit/datasets/data`` (through :mod:`importlib.resources`,
so an installed wheel or a zip works too; never with pickle)."""

from __future__ import annotations

from importlib import resources

import numpy as np

from nnjit.datasets.tabular_dataset import Dataset


def read_npz(filename: str) -> dict[str, np.ndarray]:
    """All arrays of ``data/<filename>``, fully read (fresh arrays on every call)."""
    ref = resources.files("nnjit.datasets").joinpath("data", filename)
    if not ref.is_file():
        raise FileNotFoundError(
            f"packaged dataset file {filename!r} is missing from nnjit.datasets/data "
            "(rebuild it with tools/make_datasets.py, or reinstall nnjit)"
        )
    with resources.as_file(ref) as path, np.load(path, allow_pickle=False) as npz:
        arrays = {key: npz[key] for key in npz.files}
    # np.load decompresses into new arrays; copy only if some NumPy hands back a read-only one
    return {k: (a if a.flags.writeable else a.copy()) for k, a in arrays.items()}


def names_of(arr: np.ndarray) -> tuple[str, ...]:
    """A string array as a tuple of ``str``."""
    return tuple(str(s) for s in arr.tolist())


def tabular_archive(filename: str, name: str, description: str) -> Dataset:
    """The :class:`Dataset` in ``data/<filename>`` (arrays ``X``, ``y``, ``feature_names``,
    ``target_names``)."""
    d = read_npz(filename)
    return Dataset(
        X=d["X"].astype(np.float32, copy=False),
        y=d["y"].astype(np.int64, copy=False),
        feature_names=names_of(d["feature_names"]),
        target_names=names_of(d["target_names"]),
        name=name,
        description=description,
    )
