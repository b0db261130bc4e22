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

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import numpy as np

from nnjit.checks import Bool, Choice, Int, Real
from nnjit.experiment.config_base import HASH_LENGTH, Config, check_field, field_default
from nnjit.experiment.enums import Checkpoints, Devices, Losses, Optims, Schedulers
from nnjit.experiment.excerpt import bounded_message, excerpt
from nnjit.experiment.nets import NetConfig
from nnjit.schedulers import Scheduler

__all__ = ["HASH_LENGTH", "ModelConfig", "NetConfig", "OptimizerConfig", "RunConfig",
           "SchedulerConfig", "TrainConfig"]

_DTYPES = ("float32", "float64")


@dataclass(frozen=True, kw_only=True)
class ModelConfig(Config):
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
_OPTIMIZER_ARGS = ("weight_decay", "betas", "eps", "momentum", "nesterov", "max_iter", "max_eval",
                   "tolerance_grad", "tolerance_change", "history_size", "line_search_fn")

#: The learning rate of a config that gives none: 1e-3, but torch's 1 for LBFGS, whose step
#: length is searched (or fixed at lr) along a quasi-Newton direction.
_DEFAULT_LR = {"lbfgs": 1.0}


def default_lr(kind: Optims) -> float:
    """The learning rate an :class:`OptimizerConfig` of ``kind`` has when it gives none."""
    return _DEFAULT_LR.get(kind.value, 1e-3)


def _accepts(kind: Optims, arg: str) -> bool:
    return arg in inspect.signature(kind.builder).parameters


#: LBFGS's fields (None: LBFGS's own default; the optimizer checks cross-field rules).
_LBFGS_FIELDS = {"max_iter": Int(min=1, none_ok=True), "max_eval": Int(min=1, none_ok=True),
                 "tolerance_grad": Real(min=0, none_ok=True),
                 "tolerance_change": Real(min=0, none_ok=True),
                 "history_size": Int(min=1, none_ok=True),
                 "line_search_fn": Choice("strong_wolfe", none_ok=True)}


@dataclass(frozen=True, kw_only=True)
class OptimizerConfig(Config):
    """The optimizer and how gradients reach it.

    Arguments that the chosen ``kind`` does not take (``betas`` for SGD, ``momentum`` for Adam)
    must stay at their defaults. The optimizer's signature decides which these are.

    Args:
        kind: an :class:`Optims` member or name (default ``"adam"``).
        lr: learning rate (> 0); default 1e-3 for every kind but ``lbfgs`` (1, as torch's).
            A rate at its kind's default is left out of :meth:`state` (and of the run id).
        weight_decay: L2 (AdamW: decoupled) coefficient >= 0; ``None`` (default) keeps the
            optimizer's own default (0.01 for AdamW, 0 for the others).
        betas: Adam/AdamW :math:`(\\beta_1, \\beta_2)`, each in [0, 1) (default (0.9, 0.999)).
        eps: Adam/AdamW/RMSprop denominator term (> 0, default 1e-8).
        momentum: SGD/RMSprop momentum in [0, 1) (default 0).
        nesterov: SGD Nesterov momentum (default False).
        grad_clip_norm: clip the global gradient norm to this (> 0); ``None`` (default): off.
        accumulation_steps: batches whose gradients are summed per optimizer step (int >= 1).
        max_iter: ``lbfgs`` only, as the next five (:class:`nnjit.LBFGS`'s arguments; ``None``,
            the default, keeps LBFGS's own): iterations per step (int >= 1, LBFGS: 20).
        max_eval: loss evaluations per step (int >= 1; LBFGS: ``max_iter * 5 // 4``).
        tolerance_grad: end a step when the gradient's largest entry is at most this (>= 0).
        tolerance_change: end a step when the loss or the parameters change less (>= 0).
        history_size: the curvature pairs kept (int >= 1, LBFGS: 100).
        line_search_fn: ``"strong_wolfe"``, or ``None`` for steps of length ``lr``.

    An ``lbfgs`` run trains full batch, one step per epoch: its ``train.batch_size`` left at the
    default means every training row in one batch, and it takes no ``grad_clip_norm``,
    ``accumulation_steps`` or scheduler.
    """

    kind: Optims = Optims.ADAM
    lr: float | None = None
    weight_decay: float | None = None
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    momentum: float = 0.0
    nesterov: bool = False
    grad_clip_norm: float | None = None
    accumulation_steps: int = 1
    max_iter: int | None = None
    max_eval: int | None = None
    tolerance_grad: float | None = None
    tolerance_change: float | None = None
    history_size: int | None = None
    line_search_fn: str | None = None

    def __post_init__(self):
        self._enum("kind", Optims)
        if self.lr is None:
            self._set("lr", default_lr(self.kind))
        self._param("lr", Real(gt=0))
        self._param("weight_decay", Real(min=0, none_ok=True))
        betas = self.betas
        if isinstance(betas, (str, bytes)) or not isinstance(betas, (tuple, list)) \
                or len(betas) != 2:
            raise ValueError(f"OptimizerConfig.betas must be a pair [beta1, beta2] each in "
                             f"[0, 1), got {excerpt(betas)}")
        beta = Real(min=0, lt=1)
        self._set("betas", tuple(check_field(beta, f"OptimizerConfig.betas[{i}]", b)
                                 for i, b in enumerate(betas)))
        self._param("eps", Real(gt=0))
        self._param("momentum", Real(min=0, lt=1))
        self._param("nesterov", Bool())
        self._param("grad_clip_norm", Real(gt=0, none_ok=True))
        self._param("accumulation_steps", Int(min=1))
        for name, rule in _LBFGS_FIELDS.items():
            self._param(name, rule)
        if self.kind.builder.full_batch:
            for name, off in (("grad_clip_norm", None), ("accumulation_steps", 1)):
                if getattr(self, name) != off:
                    raise ValueError(f"OptimizerConfig.{name} does not apply to kind "
                                     f"{self.kind.value!r} (its steps search their own length "
                                     "over the full batch)")
        defaults = {f.name: field_default(f) for f in fields(self)}
        for arg in _OPTIMIZER_ARGS:
            if getattr(self, arg) != defaults[arg] and not _accepts(self.kind, arg):
                takers = [k.value for k in Optims if _accepts(k, arg)]
                raise ValueError(f"OptimizerConfig.{arg} does not apply to kind "
                                 f"{self.kind.value!r} (it applies to: {', '.join(takers)})")
        try:  # cross-field rules live in the optimizer (e.g. Nesterov needs momentum)
            self.build()
        except (ValueError, TypeError) as e:
            raise ValueError(f"OptimizerConfig: {e}") from None

    @property
    def full_batch(self) -> bool:
        """Whether the optimizer steps on every training row at once (``lbfgs``)."""
        return bool(self.kind.builder.full_batch)

    def state(self, full: bool = False) -> dict[str, Any]:
        """As :meth:`Config.state`; ``lr`` at its kind's default (:func:`default_lr`) is a
        default, left out."""
        out = super().state(full)
        if not full and self.lr == default_lr(self.kind):
            out.pop("lr", None)
        return out

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
class SchedulerConfig(Config):
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
class TrainConfig(Config):
    """How long and on what batches to train, when to stop, what to keep.

    Args:
        epochs: maximum number of epochs (int >= 1, default 100).
        batch_size: rows per batch (int >= 1, default 32); ``None``: every training row in
            one batch (full batch). For a full-batch optimizer (``lbfgs``) the default means
            ``None``.
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
    batch_size: int | None = 32
    seed: int = 0
    shuffle: bool = True
    monitor: str | None = None
    mode: str = "auto"
    patience: int | None = 10
    min_delta: float = 1e-4
    restore_best: bool = True
    checkpoints: tuple[Checkpoints, ...] = _ALL_CHECKPOINTS

    def __post_init__(self):
        self._param("epochs", Int(min=1))
        self._param("batch_size", Int(min=1, none_ok=True, says="an int >= 1, or null for "
                                     "every training row in one batch"))
        self._param("seed", Int(min=0))
        self._param("shuffle", Bool())
        if self.monitor is not None and (not isinstance(self.monitor, str)
                                         or not self.monitor.strip()):
            raise ValueError(f"TrainConfig.monitor must be None or a metric name such as "
                             f"'val_loss', got {excerpt(self.monitor)}")
        self._param("mode", Choice("auto", "min", "max"))
        self._param("patience", Int(min=0, none_ok=True))
        self._param("min_delta", Real(min=0))
        self._param("restore_best", Bool())
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
class RunConfig(Config):
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

    def rows_per_batch(self, n_rows: int) -> int:
        """The training batch size for ``n_rows`` training rows: ``train.batch_size``, every row
        when it is None, and for a full-batch optimizer (``lbfgs``) when it is the default."""
        size = self.train.batch_size
        default = field_default(next(f for f in fields(TrainConfig) if f.name == "batch_size"))
        if size is None or (self.optimizer.full_batch and size == default):
            return max(int(n_rows), 1)
        return size

    def __post_init__(self):
        self._config("model", ModelConfig)
        self._config("optimizer", OptimizerConfig)
        self._config("scheduler", SchedulerConfig, none_ok=True)
        self._config("train", TrainConfig)
        if self.data is not None and (not isinstance(self.data, str) or not self.data.strip()):
            raise ValueError(f"RunConfig.data must be None or a data set name or path, got "
                             f"{excerpt(self.data)}")
        if self.optimizer.full_batch and self.scheduler is not None:
            raise ValueError(f"RunConfig.scheduler does not apply to optimizer kind "
                             f"{self.optimizer.kind.value!r} (its steps search their own "
                             "length); remove the scheduler section")
        s, epochs = self.scheduler, self.train.epochs
        if s is not None and s.kind is Schedulers.LINEAR_WARMUP and s.total_epochs is None \
                and s.warmup_epochs >= epochs:
            raise ValueError(f"SchedulerConfig.warmup_epochs ({s.warmup_epochs}) must be < "
                             f"TrainConfig.epochs ({epochs}), or the warm-up never ends")
