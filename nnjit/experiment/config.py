"""Experiment configuration: frozen, keyword-only, validated dataclasses.

A :class:`RunConfig` groups a :class:`ModelConfig` (with its :class:`NetConfig`), an
:class:`OptimizerConfig`, an optional :class:`SchedulerConfig` and a :class:`TrainConfig`. Every
config:

- validates itself on construction. A bad value raises ``ValueError`` that names the field and
  the allowed range: ``"OptimizerConfig.lr must be > 0, got -1"``. Names of enum members
  (``"adam"``, ``"relu"``) are accepted wherever a member is.
- ``state()`` gives a plain dict that is safe for YAML (str, int, float, bool, None, list, dict;
  enums as their string values). **A field at its default is left out**, so adding a field later
  with a default does not change the ids of existing runs. ``from_state(d)`` rebuilds the config
  and rejects unknown keys, listing the valid ones.
- ``to_yaml()`` / ``from_yaml(text)`` round-trip exactly, through ``yaml.safe_dump`` and
  :class:`~nnjit.experiment.safe_yaml.ConfigLoader` (plain data; no aliases, bounded size and
  nesting). The loader also reads YAML 1.2 floats such as ``1e-3``, which plain PyYAML reads as
  strings.
- error messages quote at most about 200 characters of a bad value
  (:func:`~nnjit.experiment.excerpt.excerpt`).
- ``config_hash()`` is a short sha256 of the canonical JSON of ``state()``. A run's id is its
  ``RunConfig.config_hash()``. It changes only when a value that matters changes.

Example:
    >>> cfg = RunConfig(model=ModelConfig(net=NetConfig(in_dim=64, out_dim=10,
    ...                                                 hidden_dims=(128,))),
    ...                 optimizer=OptimizerConfig(kind="adam", lr=0.01))
    >>> cfg.state()
    {'model': {'net': {'in_dim': 64, 'out_dim': 10, 'hidden_dims': [128]}},
     'optimizer': {'lr': 0.01}}
    >>> RunConfig.from_yaml(cfg.to_yaml()) == cfg
    True
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar

import numpy as np
import yaml

from nnjit.experiment.enums import (
    Activations,
    Checkpoints,
    Devices,
    Losses,
    Nets,
    Optims,
    Schedulers,
    _BuilderEnum,
)
from nnjit.experiment.excerpt import bounded_message, excerpt
from nnjit.experiment.safe_yaml import ConfigLoader, load_yaml
from nnjit.nn.gnn.sage import AGGREGATIONS
from nnjit.nn.linear import INITS
from nnjit.schedulers import Param, Scheduler

__all__ = ["ModelConfig", "NetConfig", "OptimizerConfig", "RunConfig", "SchedulerConfig",
           "TrainConfig"]

#: Length of :meth:`config_hash` in hex digits (48 bits: collisions need ~16 million runs).
HASH_LENGTH = 12


#: Unknown keys an error message lists at most.
_MAX_LISTED_KEYS = 10


def _check(param: Param, where: str, value: Any) -> Any:
    """``param.check(where, value)`` whose error quotes a bounded excerpt of ``value``."""
    try:
        return param.check(where, value)
    except ValueError as e:
        message = str(e)
        if not message.startswith(where):  # repr(value) itself failed: an int of > 4300 digits
            message = f"{where} must be {param.describe()}, got {excerpt(value)}"
        raise ValueError(bounded_message(message, value)) from None


def _plain(value: Any) -> Any:
    """A value as plain YAML/JSON data."""
    if isinstance(value, _Config):
        return value.state()
    if isinstance(value, _BuilderEnum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _default(f: dataclasses.Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


class _Config:
    """Shared behaviour: state/from_state, YAML, hashing, replace. Subclasses are dataclasses."""

    #: Fields holding another config; ``from_state`` builds them from mappings.
    _nested: ClassVar[dict[str, type]] = {}

    # -- validation helpers (used in __post_init__) ---------------------------------------------
    def _where(self, name: str) -> str:
        return f"{type(self).__name__}.{name}"

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def _param(self, name: str, param: Param) -> None:
        self._set(name, _check(param, self._where(name), getattr(self, name)))

    def _enum(self, name: str, enum: type[_BuilderEnum], none_ok: bool = False) -> None:
        value = getattr(self, name)
        if value is None and none_ok:
            return
        try:
            self._set(name, enum.get(value))
        except ValueError as e:
            raise ValueError(bounded_message(f"{self._where(name)}: {e}", value)) from None

    def _config(self, name: str, cls: type, none_ok: bool = False) -> None:
        value = getattr(self, name)
        if not (isinstance(value, cls) or (value is None and none_ok)):
            article = "an" if cls.__name__[0] in "AEIOU" else "a"
            raise ValueError(f"{self._where(name)} must be {article} {cls.__name__}"
                             f"{' or None' if none_ok else ''}, got {type(value).__name__} "
                             f"(use {type(self).__name__}.from_state to build from a mapping)")

    # -- serialisation --------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Plain, YAML-safe dict of the fields that differ from their defaults."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            default = _default(f)
            if default is not MISSING and value == default:
                continue
            out[f.name] = _plain(value)
        return out

    @classmethod
    def from_state(cls, state: Mapping[str, Any]):
        """Rebuild a config from :meth:`state` (missing fields take their defaults).

        Raises:
            ValueError: not a mapping, an unknown or missing key, or an invalid value.
        """
        if not isinstance(state, Mapping):
            raise ValueError(f"{cls.__name__}.from_state expects a mapping, got "
                             f"{type(state).__name__}")
        names = [f.name for f in fields(cls)]
        unknown = [k for k in state if k not in names]
        if unknown:
            listed = ", ".join(excerpt(k, 40) for k in unknown[:_MAX_LISTED_KEYS])
            more = len(unknown) - _MAX_LISTED_KEYS
            raise ValueError(f"{cls.__name__}: unknown key{'s' if len(unknown) > 1 else ''} "
                             f"{listed}{f' and {more} more' if more > 0 else ''}; valid keys: "
                             f"{', '.join(names)}")
        missing = [f.name for f in fields(cls) if _default(f) is MISSING and f.name not in state]
        if missing:
            raise ValueError(f"{cls.__name__}: missing required key"
                             f"{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}")
        kwargs = dict(state)
        for name, sub in cls._nested.items():
            if isinstance(kwargs.get(name), Mapping):
                kwargs[name] = sub.from_state(kwargs[name])
        return cls(**kwargs)

    def to_yaml(self) -> str:
        """:meth:`state` as YAML (``yaml.safe_dump``; fields in declaration order)."""
        return yaml.safe_dump(self.state(), sort_keys=False, default_flow_style=None)

    @classmethod
    def from_yaml(cls, text: str, name: str = "<config>"):
        """Parse YAML text with :class:`~nnjit.experiment.safe_yaml.ConfigLoader` and
        :meth:`from_state` it (``name``, e.g. the file's path, is how YAML errors call it).

        Raises:
            yaml.YAMLError: not valid YAML, or refused by the loader (an alias, deep nesting,
                over 64 KiB: :class:`~nnjit.experiment.safe_yaml.YAMLLimitError`).
            ValueError: not a valid config.
        """
        data = load_yaml(text, name, ConfigLoader)
        return cls.from_state({} if data is None else data)

    def config_hash(self) -> str:
        """Stable short id: the first :data:`HASH_LENGTH` hex digits of the sha256 of the
        canonical JSON (sorted keys, no spaces) of :meth:`state`."""
        canonical = json.dumps(self.state(), sort_keys=True, separators=(",", ":"),
                               ensure_ascii=True, allow_nan=False)
        return hashlib.sha256(canonical.encode("ascii")).hexdigest()[:HASH_LENGTH]

    def replace(self, **changes):
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)


# -- network and model ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class NetConfig(_Config):
    """The network's shape.

    Args:
        kind: a :class:`Nets` member or name (default ``"mlp"``); ``kind(config)`` builds it.
        in_dim: input features (int >= 1).
        out_dim: outputs: classes for cross-entropy, targets for regression (int >= 1).
        hidden_dims: widths of the hidden layers, each int >= 1 (default none: a linear model).
        activation: an :class:`Activations` member or name after each hidden layer
            (default ``"relu"``).
        dropout: drop probability after each hidden activation, in [0, 1) (default 0: none).
        init: weight initialisation of the ``Linear`` layers, ``"glorot_uniform"`` (default) or
            ``"torch"``.
        heads: attention heads of the hidden layers of ``graph_att`` (default 1).
        aggr: neighbourhood aggregation of ``graph_sage``: ``"mean"`` (default), ``"max"``,
            ``"sum"``.

    Graph nets use ``dropout`` before every convolution (PyG's examples' layout).
    """

    kind: Nets = Nets.MLP
    in_dim: int
    out_dim: int
    hidden_dims: tuple[int, ...] = ()
    activation: Activations = Activations.RELU
    dropout: float = 0.0
    init: str = "glorot_uniform"
    heads: int = 1
    aggr: str = "mean"

    def __post_init__(self):
        self._enum("kind", Nets)
        self._param("in_dim", Param("int", low=1))
        self._param("out_dim", Param("int", low=1))
        dims = self.hidden_dims
        if isinstance(dims, (str, bytes, Mapping)) or not hasattr(dims, "__iter__"):
            raise ValueError(f"NetConfig.hidden_dims must be a list of ints >= 1 (e.g. [64, 32]),"
                             f" got {excerpt(dims)}")
        width = Param("int", low=1)
        self._set("hidden_dims", tuple(_check(width, f"NetConfig.hidden_dims[{i}]", d)
                                       for i, d in enumerate(dims)))
        self._enum("activation", Activations)
        self._param("dropout", Param("float", low=0.0, high=1.0, high_open=True))
        self._param("init", Param("choice", choices=INITS))
        self._param("heads", Param("int", low=1))
        self._param("aggr", Param("choice", choices=AGGREGATIONS))

    def build(self):
        """The network module (``self.kind(self)``)."""
        return self.kind(self)


_DTYPES = ("float32", "float64")


@dataclass(frozen=True, kw_only=True)
class ModelConfig(_Config):
    """What is trained and how its loss is measured.

    Args:
        net: the :class:`NetConfig`.
        loss: a :class:`Losses` member or name (default ``"cross_entropy"``).
        device: a :class:`Devices` member or name (default ``"cpu"``).
        dtype: arena dtype, ``"float32"`` (default) or ``"float64"`` (NumPy dtypes accepted).
    """

    _nested: ClassVar[dict[str, type]] = {"net": NetConfig}

    net: NetConfig
    loss: Losses = Losses.CROSS_ENTROPY
    device: Devices = Devices.CPU
    dtype: str = "float32"

    def __post_init__(self):
        self._config("net", NetConfig)
        self._enum("loss", Losses)
        self._enum("device", Devices)
        try:
            name = np.dtype(self.dtype).name if not isinstance(self.dtype, bool) else None
        except TypeError:
            name = None
        if name not in _DTYPES:
            raise ValueError(f"ModelConfig.dtype must be one of {', '.join(map(repr, _DTYPES))},"
                             f" got {excerpt(self.dtype)}")
        self._set("dtype", name)
        if self.loss is Losses.CROSS_ENTROPY and self.net.out_dim < 2:
            raise ValueError("ModelConfig.loss 'cross_entropy' needs net.out_dim >= 2 (one logit "
                             f"per class), got {self.net.out_dim}; use 'bce_with_logits' for "
                             "binary targets or 'mse' for regression")

    @property
    def numpy_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)

    def build(self):
        """The network module."""
        return self.net.build()

    def build_loss(self):
        """The loss object."""
        return self.loss()


# -- optimizer -----------------------------------------------------------------------------------
#: OptimizerConfig fields passed to the optimizer's constructor when its signature takes them.
_OPTIMIZER_ARGS = ("weight_decay", "betas", "eps", "momentum", "nesterov")


def _accepts(kind: Optims, arg: str) -> bool:
    return arg in inspect.signature(kind.builder).parameters


@dataclass(frozen=True, kw_only=True)
class OptimizerConfig(_Config):
    """The optimizer and how gradients reach it.

    Arguments that the chosen ``kind`` does not take (``betas`` for SGD, ``momentum`` for Adam)
    must stay at their defaults. The optimizer's signature decides which these are.

    Args:
        kind: an :class:`Optims` member or name (default ``"adam"``).
        lr: learning rate (> 0, default 1e-3 for every kind).
        weight_decay: L2 (AdamW: decoupled) coefficient >= 0; ``None`` (default) keeps the
            optimizer's own default (0.01 for AdamW, 0 for the others).
        betas: Adam/AdamW :math:`(\\beta_1, \\beta_2)`, each in [0, 1) (default (0.9, 0.999)).
        eps: Adam/AdamW/RMSprop denominator term (> 0, default 1e-8).
        momentum: SGD/RMSprop momentum in [0, 1) (default 0).
        nesterov: SGD Nesterov momentum (default False).
        grad_clip_norm: clip the global gradient norm to this (> 0); ``None`` (default): off.
        accumulation_steps: batches whose gradients are summed per optimizer step (int >= 1).
    """

    kind: Optims = Optims.ADAM
    lr: float = 1e-3
    weight_decay: float | None = None
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    momentum: float = 0.0
    nesterov: bool = False
    grad_clip_norm: float | None = None
    accumulation_steps: int = 1

    def __post_init__(self):
        self._enum("kind", Optims)
        self._param("lr", Param("float", low=0.0, low_open=True))
        self._param("weight_decay", Param("float", low=0.0, none_ok=True))
        betas = self.betas
        if isinstance(betas, (str, bytes)) or not isinstance(betas, (tuple, list)) \
                or len(betas) != 2:
            raise ValueError(f"OptimizerConfig.betas must be a pair [beta1, beta2] each in "
                             f"[0, 1), got {excerpt(betas)}")
        beta = Param("float", low=0.0, high=1.0, high_open=True)
        self._set("betas", tuple(_check(beta, f"OptimizerConfig.betas[{i}]", b)
                                 for i, b in enumerate(betas)))
        self._param("eps", Param("float", low=0.0, low_open=True))
        self._param("momentum", Param("float", low=0.0, high=1.0, high_open=True))
        self._param("nesterov", Param("bool"))
        self._param("grad_clip_norm", Param("float", low=0.0, low_open=True, none_ok=True))
        self._param("accumulation_steps", Param("int", low=1))
        defaults = {f.name: _default(f) for f in fields(self)}
        for arg in _OPTIMIZER_ARGS:
            if getattr(self, arg) != defaults[arg] and not _accepts(self.kind, arg):
                takers = [k.value for k in Optims if _accepts(k, arg)]
                raise ValueError(f"OptimizerConfig.{arg} does not apply to kind "
                                 f"{self.kind.value!r} (it applies to: {', '.join(takers)})")
        try:  # cross-field rules live in the optimizer (e.g. Nesterov needs momentum)
            self.build()
        except (ValueError, TypeError) as e:
            raise ValueError(f"OptimizerConfig: {e}") from None

    def optimizer_kwargs(self) -> dict[str, Any]:
        """The constructor arguments of the optimizer this config builds."""
        kwargs = {"lr": self.lr}
        for arg in _OPTIMIZER_ARGS:
            value = getattr(self, arg)
            if value is not None and _accepts(self.kind, arg):
                kwargs[arg] = value
        return kwargs

    def build(self):
        """A fresh optimizer, e.g. ``nnjit.Adam(lr=...)``."""
        return self.kind(**self.optimizer_kwargs())


# -- scheduler -----------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class SchedulerConfig(_Config):
    """A learning-rate scheduler: its ``kind`` and the hyperparameters that kind takes.

    Every other field is ``None`` (the default), which means "the scheduler's default". Setting a
    field the kind does not take is an error that lists the fields it does take. Fields and
    ranges are those of :mod:`nnjit.schedulers` (e.g. ``step`` takes ``step_size``, ``gamma``;
    ``cosine`` takes ``T_max``, ``eta_min``; ``one_cycle`` takes ``max_lr``, ``total_steps``,
    ``epochs``, ``pct_start``, ``anneal_strategy``, ``div_factor``, ``final_div_factor``,
    ``three_phase``; ``linear_warmup`` takes ``warmup_epochs``, ``total_epochs``, ``final_lr``;
    ``plateau`` takes ``mode``, ``factor``, ``patience``, ``threshold``, ``threshold_mode``,
    ``cooldown``, ``min_lr``, ``eps``).
    """

    kind: Schedulers
    step_size: int | None = None
    gamma: float | None = None
    T_max: int | None = None
    eta_min: float | None = None
    max_lr: float | None = None
    total_steps: int | None = None
    epochs: int | None = None
    pct_start: float | None = None
    anneal_strategy: str | None = None
    div_factor: float | None = None
    final_div_factor: float | None = None
    three_phase: bool | None = None
    warmup_epochs: int | None = None
    total_epochs: int | None = None
    final_lr: float | None = None
    mode: str | None = None
    factor: float | None = None
    patience: int | None = None
    threshold: float | None = None
    threshold_mode: str | None = None
    cooldown: int | None = None
    min_lr: float | None = None
    eps: float | None = None

    def __post_init__(self):
        self._enum("kind", Schedulers)
        cls: type[Scheduler] = self.kind.builder
        for f in fields(self):
            if f.name == "kind" or getattr(self, f.name) is None:
                continue
            if f.name not in cls.params:
                raise ValueError(f"SchedulerConfig.{f.name} does not apply to kind "
                                 f"{self.kind.value!r}; its fields are: "
                                 f"{', '.join(cls.params)}")
            self._param(f.name, cls.params[f.name])
        for name in cls.required():
            if getattr(self, name) is None:
                raise ValueError(f"SchedulerConfig.{name} is required for kind "
                                 f"{self.kind.value!r} ({cls.params[name].describe()})")
        try:  # cross-field rules live in the scheduler
            self.build()
        except (ValueError, TypeError) as e:
            raise ValueError(f"SchedulerConfig: {e}") from None

    def scheduler_kwargs(self) -> dict[str, Any]:
        """The constructor arguments of the scheduler (fields that are set)."""
        return {k: getattr(self, k) for k in self.kind.builder.params
                if getattr(self, k) is not None}

    def build(self) -> Scheduler:
        """A fresh scheduler, e.g. ``nnjit.schedulers.StepLR(step_size=10)``."""
        return self.kind(**self.scheduler_kwargs())


# -- training ------------------------------------------------------------------------------------
_ALL_CHECKPOINTS = tuple(Checkpoints)


@dataclass(frozen=True, kw_only=True)
class TrainConfig(_Config):
    """How long and on what batches to train, when to stop, what to keep.

    Args:
        epochs: maximum number of epochs (int >= 1, default 100).
        batch_size: rows per batch (int >= 1, default 32).
        seed: seed for initialisation, shuffling and dropout (int >= 0, default 0).
        shuffle: reshuffle the training rows every epoch (default True).
        monitor: logged metric for early stopping and BEST, e.g. ``"val_loss"``; ``None``
            (default): ``val_loss`` with validation data, else ``train_loss``. Whether it exists
            is checked when training starts.
        mode: ``"auto"`` (default: ``max`` for accuracy-like metrics, else ``min``), ``"min"``
            or ``"max"``.
        patience: epochs without improvement before stopping (int >= 0, default 10; the
            trainer's ``n_iter_no_change``); ``None`` disables early stopping.
        min_delta: minimum improvement that counts, >= 0 (default 1e-4; the trainer's ``tol``).
        restore_best: restore the best weights at the end (default True).
        checkpoints: :class:`Checkpoints` phases to save, as names (default: all six). They are
            kept in canonical order, so ``[last, first]`` equals ``[first, last]``.
    """

    epochs: int = 100
    batch_size: int = 32
    seed: int = 0
    shuffle: bool = True
    monitor: str | None = None
    mode: str = "auto"
    patience: int | None = 10
    min_delta: float = 1e-4
    restore_best: bool = True
    checkpoints: tuple[Checkpoints, ...] = _ALL_CHECKPOINTS

    def __post_init__(self):
        self._param("epochs", Param("int", low=1))
        self._param("batch_size", Param("int", low=1))
        self._param("seed", Param("int", low=0))
        self._param("shuffle", Param("bool"))
        if self.monitor is not None and (not isinstance(self.monitor, str)
                                         or not self.monitor.strip()):
            raise ValueError(f"TrainConfig.monitor must be None or a metric name such as "
                             f"'val_loss', got {excerpt(self.monitor)}")
        self._param("mode", Param("choice", choices=("auto", "min", "max")))
        self._param("patience", Param("int", low=0, none_ok=True))
        self._param("min_delta", Param("float", low=0.0))
        self._param("restore_best", Param("bool"))
        phases = self.checkpoints
        if isinstance(phases, (str, bytes, Mapping)) or not hasattr(phases, "__iter__"):
            raise ValueError(f"TrainConfig.checkpoints must be a list of checkpoint names (e.g. "
                             f"['last', 'best']; valid: {', '.join(Checkpoints.names())}), got "
                             f"{excerpt(phases)}")
        members = []
        for i, p in enumerate(phases):
            try:
                member = Checkpoints.get(p)
            except ValueError as e:
                raise ValueError(bounded_message(f"TrainConfig.checkpoints[{i}]: {e}", p)) \
                    from None
            if member in members:
                raise ValueError(f"TrainConfig.checkpoints lists {member.value!r} twice")
            members.append(member)
        self._set("checkpoints", tuple(c for c in Checkpoints if c in members))


# -- the run -------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class RunConfig(_Config):
    """Everything that decides a run's result. Its :meth:`config_hash` is the run id.

    Args:
        model: the :class:`ModelConfig`.
        optimizer: the :class:`OptimizerConfig` (default Adam, lr 1e-3).
        scheduler: a :class:`SchedulerConfig`, or ``None`` (default) for a constant rate.
        train: the :class:`TrainConfig`.
        data: the data set, by name or path (part of the id); ``None`` (default) when the data
            is passed in code.
    """

    _nested: ClassVar[dict[str, type]] = {"model": ModelConfig, "optimizer": OptimizerConfig,
                                          "scheduler": SchedulerConfig, "train": TrainConfig}

    model: ModelConfig
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    scheduler: SchedulerConfig | None = None
    train: TrainConfig = field(default_factory=TrainConfig)
    data: str | None = None

    def __post_init__(self):
        self._config("model", ModelConfig)
        self._config("optimizer", OptimizerConfig)
        self._config("scheduler", SchedulerConfig, none_ok=True)
        self._config("train", TrainConfig)
        if self.data is not None and (not isinstance(self.data, str) or not self.data.strip()):
            raise ValueError(f"RunConfig.data must be None or a data set name or path, got "
                             f"{excerpt(self.data)}")
        s, epochs = self.scheduler, self.train.epochs
        if s is not None and s.kind is Schedulers.LINEAR_WARMUP and s.total_epochs is None \
                and s.warmup_epochs >= epochs:
            raise ValueError(f"SchedulerConfig.warmup_epochs ({s.warmup_epochs}) must be < "
                             f"TrainConfig.epochs ({epochs}), or the warm-up never ends")
