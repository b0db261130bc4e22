"""Grids of configurations: dotted config keys and the values each one takes.

A grid maps dotted :class:`~nnjit.experiment.config.RunConfig` keys to lists of values, e.g.
``{"optimizer.lr": [1e-3, 1e-2], "model.net.hidden_dims": [[64], [128]]}``; :func:`expand_grid`
makes one configuration per combination (the last key varies fastest). A key names a setting
(``optimizer.lr``) or a whole section (``scheduler``, whose values are mappings or ``None``).
Every key is checked before any configuration is built: an unknown one is a ``ValueError``
naming it and listing the valid keys at that level.

On the command line a grid entry is ``KEY=V1,V2,...`` (:func:`parse_grid_entry`): the values are
read as one YAML flow list (``[V1,V2,...]``) by nnjit's safe loader, so ``1e-3`` is a float,
``[64],[128]`` two lists and ``null`` None; nothing is evaluated.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from nnjit.experiment.config import RunConfig
from nnjit.experiment.config_base import plain
from nnjit.experiment.excerpt import excerpt

__all__ = ["MAX_GRID_POINTS", "GridPoint", "check_grid", "config_value", "expand_grid",
           "grid_keys", "parse_grid_entry", "varying_keys"]

#: Most configurations one grid may expand to (a typo such as 10 keys of 10 values would
#: otherwise build 10**10 configs before anything runs).
MAX_GRID_POINTS = 10_000


@dataclasses.dataclass(frozen=True)
class GridPoint:
    """One combination of a grid: ``values`` (key -> value, in the grid's key order) and the
    :class:`RunConfig` they make, or the ``error`` (``"ValueError: ..."``) when they make none."""

    values: dict[str, Any]
    config: RunConfig | None
    error: str | None = None


def _sections(cls) -> dict[str, type]:
    return getattr(cls, "_nested", {})


def grid_keys(cls: type = RunConfig, prefix: str = "") -> list[str]:
    """Every dotted key of ``cls`` (sections and the settings inside them), in field order."""
    keys = []
    for f in dataclasses.fields(cls):
        keys.append(prefix + f.name)
        sub = _sections(cls).get(f.name)
        if sub is not None:
            keys += grid_keys(sub, f"{prefix}{f.name}.")
    return keys


def _check_key(key) -> tuple[str, ...]:
    """The parts of a valid dotted key; ValueError naming the key and the valid ones."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"grid key {excerpt(key, 60)} must be a dotted config key such as "
                         f"'optimizer.lr'; valid keys: {', '.join(grid_keys())}")
    parts = tuple(key.split("."))
    cls: type | None = RunConfig
    for depth, part in enumerate(parts):
        where = ".".join(parts[:depth])
        if cls is None:
            raise ValueError(f"grid key {excerpt(key, 60)}: {where} is a setting, not a section "
                             f"with keys inside it; give {where!r} itself")
        names = [f.name for f in dataclasses.fields(cls)]
        if part not in names:
            prefix = f"{where}." if where else ""
            under = f" under {where!r}" if where else ""
            raise ValueError(f"grid key {excerpt(key, 60)}: no setting {excerpt(part, 40)}"
                             f"{under}; valid keys{under}: "
                             f"{', '.join(prefix + n for n in names)}")
        cls = _sections(cls).get(part)
    return parts


def check_grid(grid) -> dict[tuple[str, ...], list]:
    """``{key parts: values}`` of a valid grid; ValueError naming the first bad key or value list
    (an unknown key, overlapping keys such as ``optimizer`` and ``optimizer.lr``, values that are
    not a non-empty list, more than :data:`MAX_GRID_POINTS` combinations)."""
    if not isinstance(grid, Mapping) or not grid:
        raise ValueError(f"grid must be a non-empty mapping of dotted config keys to lists of "
                         f"values (e.g. {{'optimizer.lr': [0.001, 0.01]}}), got "
                         f"{excerpt(grid, 80)}")
    checked: dict[tuple[str, ...], list] = {}
    for key, values in grid.items():
        parts = _check_key(key)
        for other in checked:
            short, long = sorted((parts, other), key=len)
            if long[:len(short)] == short:
                raise ValueError(f"grid keys {'.'.join(other)!r} and {key!r} overlap: give a "
                                 "section or settings inside it, not both")
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Sequence) \
                or not values:
            raise ValueError(f"grid[{key!r}] must be a non-empty list of values, got "
                             f"{excerpt(values, 80)} (a single value is a list of one: [value])")
        checked[parts] = list(values)
    count = math.prod(len(v) for v in checked.values())
    if count > MAX_GRID_POINTS:
        raise ValueError(f"the grid makes {count} configurations, more than the "
                         f"{MAX_GRID_POINTS} a sweep takes; split it into several sweeps")
    return checked


def _assign(state: dict, parts: tuple[str, ...], value) -> None:
    """Set ``state[parts[0]][parts[1]]... = value``, creating the sections on the way."""
    for part in parts[:-1]:
        section = state.get(part)
        state[part] = section = dict(section) if isinstance(section, Mapping) else {}
        state = section
    state[parts[-1]] = plain(value)


def expand_grid(base, grid) -> list[GridPoint]:
    """One :class:`GridPoint` per combination of ``grid``'s values applied to ``base`` (a
    :class:`RunConfig` or its ``state()`` mapping), in order (the last key varies fastest).

    A combination that is not a valid config (``momentum`` with Adam, a negative rate) gets its
    ``error`` instead of a config; a bad grid raises ValueError before anything is built.
    """
    if isinstance(base, RunConfig):
        base_state = base.state()
    elif isinstance(base, Mapping):
        base_state = copy.deepcopy(dict(base))
        RunConfig.from_state(base_state)  # a bad base config fails here, whatever the grid
    else:
        raise TypeError(f"base_config must be a RunConfig or its state() mapping, got "
                        f"{type(base).__name__}")
    checked = check_grid(grid)
    points = []
    for combination in itertools.product(*checked.values()):
        state = copy.deepcopy(base_state)
        values = {}
        for parts, value in zip(checked, combination):
            _assign(state, parts, value)
            values[".".join(parts)] = plain(value)
        try:
            points.append(GridPoint(values, RunConfig.from_state(state)))
        except (ValueError, TypeError) as e:
            points.append(GridPoint(values, None, f"{type(e).__name__}: {e}"))
    return points


def config_value(config: RunConfig, key: str):
    """The plain value of a dotted key in ``config`` (its default when the config leaves it
    out); e.g. ``config_value(cfg, "optimizer.lr")``."""
    value: Any = config
    for part in _check_key(key):
        value = getattr(value, part) if value is not None else None
    return plain(value)


def varying_keys(configs: Sequence[RunConfig]) -> list[str]:
    """The dotted setting keys whose values differ between ``configs`` (in field order)."""
    keys = [k for k in grid_keys() if not _is_section(k)]
    return [k for k in keys
            if len({repr(config_value(c, k)) for c in configs}) > 1]


def _is_section(key: str) -> bool:
    cls: type | None = RunConfig
    for part in key.split("."):
        cls = _sections(cls).get(part) if cls is not None else None
    return cls is not None


def parse_grid_entry(text: str) -> tuple[str, list]:
    """``(key, values)`` of a command-line grid entry ``KEY=V1,V2,...``; ValueError naming the
    entry when it has no ``=``, no values, or values that are not plain YAML."""
    import yaml

    from nnjit.experiment.safe_yaml import ConfigLoader, describe_yaml_error, load_yaml

    key, sep, rest = str(text).partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"--grid {excerpt(text, 80)}: expected KEY=V1,V2,... (e.g. "
                         "optimizer.lr=1e-3,1e-2)")
    if not rest.strip():
        raise ValueError(f"--grid {excerpt(text, 80)}: no values after '='")
    try:
        values = load_yaml(f"[{rest}]", f"--grid {key}", ConfigLoader)
    except yaml.YAMLError as e:
        raise ValueError(f"--grid {excerpt(text, 80)}: the values are not a plain YAML list "
                         f"({describe_yaml_error(e)}); quote a string that holds a comma") from e
    if not isinstance(values, list) or not values:
        raise ValueError(f"--grid {excerpt(text, 80)}: no values after '='")
    return key, values
