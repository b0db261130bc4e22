"""Learning-rate schedulers that describe themselves to the compiled training loop.

The compiled loop never calls back into Python per step, so a scheduler hands it data, not code:

- Every scheduler but :class:`ReduceLROnPlateau` depends only on the step index. It gives a
  table, ``lr_table(base_lr, epochs, steps_per_epoch)``: a float64 vector of shape
  ``(epochs * steps_per_epoch,)`` that holds the learning rate of every *optimizer step*. The
  loop reads ``table[step]``. Per-epoch schedulers repeat their value within an epoch. With
  gradient accumulation, ``steps_per_epoch`` counts optimizer steps, not batches.
- :class:`ReduceLROnPlateau` depends on the monitored metric. It gives a parameter vector
  (``plateau_params()``) and a state vector (``plateau_state(base_lr)``), and
  :func:`plateau_step` is the rule. That function sticks to the subset Numba compiles, so the
  compiled loop can compile this same function. The class's ``step(metric)`` is the pure-Python
  reference the tests compare with PyTorch.

The tables follow ``torch.optim.lr_scheduler`` step for step. The chained (recursive) formulas
are evaluated in the same order, so a table equals PyTorch's sequence bit for bit (the tests check
this). The exception is :class:`LinearWarmupDecay`, which PyTorch has no single class for. It
matches ``SequentialLR(LinearLR, LinearLR)`` to rounding.

Every hyperparameter is declared once in the class's ``params`` table (a :mod:`nnjit.checks`
rule: type and range) and its default once in the ``__init__`` signature.
:class:`~nnjit.experiment.SchedulerConfig` validates against the same table.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, ClassVar

import numpy as np

from nnjit.checks import Bool, Choice, Int, Param, Real
from nnjit.kernels.plateau import PLATEAU_PARAMS, PLATEAU_STATE
from nnjit.kernels.plateau import plateau_rule as plateau_step

__all__ = [
    "CosineAnnealingLR", "ExponentialLR", "LinearWarmupDecay", "OneCycleLR", "PLATEAU_PARAMS",
    "PLATEAU_STATE", "Param", "ReduceLROnPlateau", "Scheduler", "StepLR", "plateau_step",
]


# -- hyperparameter specs ------------------------------------------------------------------------
_POS = Real(gt=0)
_NONNEG = Real(min=0)
_POS_INT = Int(min=1)
_GAMMA = Real(gt=0, max=1)


# -- base class ----------------------------------------------------------------------------------
class Scheduler:
    """Base class: a learning-rate schedule described by its hyperparameters.

    Subclasses set ``name`` (the :class:`~nnjit.experiment.Schedulers` value), ``params`` (one
    :class:`Param` per hyperparameter, in signature order) and ``per_step`` (the schedule changes
    every optimizer step rather than every epoch), and implement ``_epoch_lrs`` or ``_step_lrs``.
    """

    name: ClassVar[str]
    params: ClassVar[dict[str, Param]]
    per_step: ClassVar[bool] = False
    metric_driven: ClassVar[bool] = False

    def _init(self, **values) -> None:
        for key, value in values.items():
            setattr(self, key, self.params[key].check(f"{type(self).__name__}.{key}", value))

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Hyperparameter defaults from the ``__init__`` signature; required ones are left out."""
        sig = inspect.signature(cls.__init__)
        return {k: p.default for k, p in sig.parameters.items()
                if k in cls.params and p.default is not inspect.Parameter.empty}

    @classmethod
    def required(cls) -> tuple[str, ...]:
        """Hyperparameters without a default."""
        defaults = cls.defaults()
        return tuple(k for k in cls.params if k not in defaults)

    def get_config(self) -> dict[str, Any]:
        """The hyperparameters, as passed to ``__init__``."""
        return {k: getattr(self, k) for k in self.params}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.get_config() == other.get_config()

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(self.get_config().items())))

    def lr_table(self, base_lr: float, epochs: int, steps_per_epoch: int = 1) -> np.ndarray:
        """The learning rate of every optimizer step of a run.

        Args:
            base_lr: the optimizer's learning rate (> 0).
            epochs: number of epochs of the run (>= 1).
            steps_per_epoch: optimizer steps per epoch (>= 1); with gradient accumulation,
                ``ceil(batches / accumulation_steps)``.

        Returns:
            float64 array of shape ``(epochs * steps_per_epoch,)``; entry ``e * steps_per_epoch +
            s`` is the learning rate of step ``s`` of epoch ``e``.

        Raises:
            ValueError: a bad argument, or one inconsistent with the hyperparameters.
            TypeError: for :class:`ReduceLROnPlateau`, which has no table.
        """
        where = f"{type(self).__name__}.lr_table"
        base_lr = _POS.check(f"{where} base_lr", base_lr)
        epochs = _POS_INT.check(f"{where} epochs", epochs)
        steps_per_epoch = _POS_INT.check(f"{where} steps_per_epoch", steps_per_epoch)
        if self.per_step:
            lrs = self._step_lrs(base_lr, epochs, steps_per_epoch)
        else:
            lrs = np.repeat(np.asarray(self._epoch_lrs(base_lr, epochs), np.float64),
                            steps_per_epoch)
        return np.ascontiguousarray(lrs, dtype=np.float64)

    def _epoch_lrs(self, base_lr: float, epochs: int) -> list[float]:
        raise NotImplementedError

    def _step_lrs(self, base_lr: float, epochs: int, steps_per_epoch: int) -> np.ndarray:
        raise NotImplementedError


# -- per-epoch schedules -------------------------------------------------------------------------
class StepLR(Scheduler):
    r"""Multiply the learning rate by ``gamma`` every ``step_size`` epochs
    (``torch.optim.lr_scheduler.StepLR``).

    .. math:: \eta_e = \eta_0\,\gamma^{\lfloor e / \text{step\_size} \rfloor}

    Args:
        step_size: epochs between decays (int >= 1).
        gamma: decay factor in (0, 1] (default 0.1).
    """

    name = "step"
    params: ClassVar[dict[str, Param]] = {"step_size": _POS_INT, "gamma": _GAMMA}

    def __init__(self, step_size: int, gamma: float = 0.1):
        self._init(step_size=step_size, gamma=gamma)

    def _epoch_lrs(self, base_lr, epochs):
        lrs, lr = [], base_lr
        for e in range(epochs):
            if e > 0 and e % self.step_size == 0:  # chained, as PyTorch: same rounding
                lr = lr * self.gamma
            lrs.append(lr)
        return lrs


class ExponentialLR(Scheduler):
    r"""Multiply the learning rate by ``gamma`` every epoch
    (``torch.optim.lr_scheduler.ExponentialLR``).

    .. math:: \eta_e = \eta_0\,\gamma^{e}

    Args:
        gamma: decay factor in (0, 1].
    """

    name = "exponential"
    params: ClassVar[dict[str, Param]] = {"gamma": _GAMMA}

    def __init__(self, gamma: float):
        self._init(gamma=gamma)

    def _epoch_lrs(self, base_lr, epochs):
        lrs, lr = [], base_lr
        for e in range(epochs):
            if e > 0:
                lr = lr * self.gamma
            lrs.append(lr)
        return lrs


class CosineAnnealingLR(Scheduler):
    r"""Cosine annealing from the base rate to ``eta_min`` over ``T_max`` epochs
    (``torch.optim.lr_scheduler.CosineAnnealingLR``; Loshchilov & Hutter, "SGDR",
    https://arxiv.org/abs/1608.03983).

    .. math::
        \eta_e = \eta_{\min}
                 + \tfrac12(\eta_0 - \eta_{\min})\left(1 + \cos\frac{e\pi}{T_{\max}}\right)

    PyTorch evaluates this recursively from the previous rate, and so do we, so the table equals
    PyTorch's bit for bit. As in PyTorch, epochs past ``T_max`` follow the cosine back up (no
    restart).

    Args:
        T_max: epochs of the half period (int >= 1); ``None`` (default) means the run's ``epochs``.
        eta_min: the final learning rate, >= 0 (default 0).
    """

    name = "cosine"
    params: ClassVar[dict[str, Param]] = {"T_max": Int(min=1, none_ok=True),
                                          "eta_min": _NONNEG}

    def __init__(self, T_max: int | None = None, eta_min: float = 0.0):
        self._init(T_max=T_max, eta_min=eta_min)

    def _epoch_lrs(self, base_lr, epochs):
        t_max = epochs if self.T_max is None else self.T_max
        eta_min = self.eta_min
        lrs, lr = [], base_lr
        for e in range(epochs):
            if e == 0:
                pass
            elif (e - 1 - t_max) % (2 * t_max) == 0:  # the recursion's 0/0 point: PyTorch's branch
                lr = lr + (base_lr - eta_min) * (1 - math.cos(math.pi / t_max)) / 2
            else:
                lr = ((1 + math.cos(math.pi * e / t_max))
                      / (1 + math.cos(math.pi * (e - 1) / t_max)) * (lr - eta_min) + eta_min)
            lrs.append(lr)
        return lrs


class LinearWarmupDecay(Scheduler):
    r"""Linear warm-up to the base rate, then linear decay to ``final_lr``.

    The warm-up does not start at 0: an epoch at learning rate 0 would be wasted. The rate rises
    linearly as if it had been 0 one epoch *before* the first. Symmetrically, the decay reaches
    ``final_lr`` one epoch *after* the last, so with the default ``final_lr=0`` every epoch
    still trains:

    .. math::
        \eta_e = \begin{cases}
          \eta_0\,\dfrac{e + 1}{W + 1} & e < W\\[4pt]
          \eta_0 + (\eta_{\text{final}} - \eta_0)\,\dfrac{e - W}{T - W} & W \le e < T\\[4pt]
          \eta_{\text{final}} & e \ge T
        \end{cases}

    with :math:`W` = ``warmup_epochs`` and :math:`T` = ``total_epochs``. The base rate is reached
    at epoch :math:`W`. This equals PyTorch's
    ``SequentialLR([LinearLR(start_factor=1/(W+1), total_iters=W), LinearLR(end_factor=final/base,
    total_iters=T-W)], milestones=[W])`` up to rounding.

    Args:
        warmup_epochs: epochs of warm-up (int >= 0; 0 gives pure linear decay).
        total_epochs: :math:`T` (int >= 1, > ``warmup_epochs``); ``None`` (default) means the
            run's ``epochs``.
        final_lr: the rate the decay aims at, in [0, base_lr] (default 0).
    """

    name = "linear_warmup"
    params: ClassVar[dict[str, Param]] = {
        "warmup_epochs": Int(min=0),
        "total_epochs": Int(min=1, none_ok=True),
        "final_lr": _NONNEG,
    }

    def __init__(self, warmup_epochs: int, total_epochs: int | None = None,
                 final_lr: float = 0.0):
        self._init(warmup_epochs=warmup_epochs, total_epochs=total_epochs, final_lr=final_lr)
        if self.total_epochs is not None:
            self._check_total(self.total_epochs, "total_epochs")

    def _check_total(self, total: int, what: str) -> None:
        if total <= self.warmup_epochs:
            raise ValueError(f"LinearWarmupDecay: {what} ({total}) must be > warmup_epochs "
                             f"({self.warmup_epochs}), so that the base learning rate is reached")

    def _epoch_lrs(self, base_lr, epochs):
        total = epochs if self.total_epochs is None else self.total_epochs
        self._check_total(total, "the run's epochs" if self.total_epochs is None else
                          "total_epochs")
        if self.final_lr > base_lr:
            raise ValueError(f"LinearWarmupDecay: final_lr ({self.final_lr!r}) must be <= the "
                             f"base learning rate ({base_lr!r})")
        w, final = self.warmup_epochs, self.final_lr
        lrs = []
        for e in range(epochs):
            if e < w:
                lrs.append(base_lr * (e + 1) / (w + 1))
            elif e < total:
                lrs.append(base_lr + (final - base_lr) * (e - w) / (total - w))
            else:
                lrs.append(final)
        return lrs


# -- per-step schedule ---------------------------------------------------------------------------
class OneCycleLR(Scheduler):
    r"""The 1cycle policy, stepped every optimizer step (``torch.optim.lr_scheduler.OneCycleLR``;
    Smith & Topin, "Super-Convergence", https://arxiv.org/abs/1708.07120).

    The rate goes from ``max_lr / div_factor`` up to ``max_lr`` over the first ``pct_start`` of
    the cycle, then anneals down to ``max_lr / div_factor / final_div_factor``. With
    ``three_phase`` it first comes back down symmetrically to the initial rate. The optimizer's
    own learning rate is ignored, as in PyTorch. Momentum is not cycled (PyTorch's
    ``cycle_momentum=False``).

    Args:
        max_lr: peak learning rate (> 0).
        total_steps: steps in the cycle (int >= 1). If neither this nor ``epochs`` is given
            (default), the cycle is the whole run.
        epochs: alternatively, epochs in the cycle (times the run's ``steps_per_epoch``).
        pct_start: fraction of the cycle spent increasing, in [0, 1] (default 0.3).
        anneal_strategy: ``"cos"`` (default) or ``"linear"``.
        div_factor: initial rate = max_lr / div_factor (> 0, default 25).
        final_div_factor: final rate = initial rate / final_div_factor (> 0, default 1e4).
        three_phase: use PyTorch's three-phase variant (default False).
    """

    name = "one_cycle"
    per_step = True
    params: ClassVar[dict[str, Param]] = {
        "max_lr": _POS,
        "total_steps": Int(min=1, none_ok=True),
        "epochs": Int(min=1, none_ok=True),
        "pct_start": Real(min=0, max=1),
        "anneal_strategy": Choice("cos", "linear"),
        "div_factor": _POS,
        "final_div_factor": _POS,
        "three_phase": Bool(),
    }

    def __init__(self, max_lr: float, total_steps: int | None = None, epochs: int | None = None,
                 pct_start: float = 0.3, anneal_strategy: str = "cos", div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False):
        self._init(max_lr=max_lr, total_steps=total_steps, epochs=epochs, pct_start=pct_start,
                   anneal_strategy=anneal_strategy, div_factor=div_factor,
                   final_div_factor=final_div_factor, three_phase=three_phase)
        if total_steps is not None and epochs is not None:
            raise ValueError("OneCycleLR: pass total_steps or epochs, not both")

    def _step_lrs(self, base_lr, epochs, steps_per_epoch):
        n_steps = epochs * steps_per_epoch
        if self.total_steps is not None:
            total = self.total_steps
        elif self.epochs is not None:
            total = self.epochs * steps_per_epoch
        else:
            total = n_steps
        if n_steps > total:
            raise ValueError(f"OneCycleLR: the run has {n_steps} optimizer steps ({epochs} epochs "
                             f"x {steps_per_epoch}) but the cycle has only {total}; raise "
                             "total_steps/epochs or leave both unset to span the run")
        initial = self.max_lr / self.div_factor
        peak, final = self.max_lr, initial / self.final_div_factor
        pct = self.pct_start
        if self.three_phase:
            phases = [(float(pct * total) - 1, initial, peak),
                      (float(2 * pct * total) - 2, peak, initial),
                      (total - 1, initial, final)]
        else:
            phases = [(float(pct * total) - 1, initial, peak), (total - 1, peak, final)]
        anneal = _anneal_cos if self.anneal_strategy == "cos" else _anneal_linear
        out = np.empty(n_steps, np.float64)
        for step in range(n_steps):
            start_step = 0.0
            for i, (end_step, start_lr, end_lr) in enumerate(phases):
                if step <= end_step or i == len(phases) - 1:
                    span = end_step - start_step
                    # A phase of zero length (pct_start * total_steps == 1) is over at once:
                    # PyTorch divides 0 by 0 there; we take its end value.
                    frac = (step - start_step) / span if span != 0 else 1.0
                    out[step] = anneal(start_lr, end_lr, frac)
                    break
                start_step = end_step
        return out


def _anneal_cos(start: float, end: float, pct: float) -> float:
    return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)


def _anneal_linear(start: float, end: float, pct: float) -> float:
    return (end - start) * pct + start


# -- metric-driven schedule ----------------------------------------------------------------------


class ReduceLROnPlateau(Scheduler):
    """Reduce the learning rate when a monitored metric stops improving
    (``torch.optim.lr_scheduler.ReduceLROnPlateau``). See :func:`plateau_step` for the rule.

    The compiled loop gets ``plateau_params()`` and ``plateau_state(base_lr)`` and runs
    :func:`plateau_step` once per epoch. ``reset(base_lr)`` and ``step(metric)`` run the same rule
    in Python.

    Args:
        mode: ``"min"`` (default; lower is better) or ``"max"``.
        factor: multiplier applied on a plateau, in (0, 1) (default 0.1).
        patience: bad epochs tolerated before reducing (int >= 0, default 10).
        threshold: minimum significant improvement, >= 0 (default 1e-4).
        threshold_mode: ``"rel"`` (default) or ``"abs"``.
        cooldown: epochs after a reduction during which bad epochs are ignored (int >= 0).
        min_lr: lower bound on the learning rate, >= 0 (default 0).
        eps: reductions smaller than this are skipped, >= 0 (default 1e-8).

    Example:
        >>> sched = ReduceLROnPlateau(patience=2).reset(0.1)
        >>> [sched.step(m) for m in (1.0, 1.0, 1.0, 1.0)]
        [0.1, 0.1, 0.1, 0.01]
    """

    name = "plateau"
    metric_driven = True
    params: ClassVar[dict[str, Param]] = {
        "mode": Choice("min", "max"),
        "factor": Real(gt=0, lt=1),
        "patience": Int(min=0),
        "threshold": _NONNEG,
        "threshold_mode": Choice("rel", "abs"),
        "cooldown": Int(min=0),
        "min_lr": _NONNEG,
        "eps": _NONNEG,
    }

    def __init__(self, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_mode: str = "rel", cooldown: int = 0,
                 min_lr: float = 0.0, eps: float = 1e-8):
        self._init(mode=mode, factor=factor, patience=patience, threshold=threshold,
                   threshold_mode=threshold_mode, cooldown=cooldown, min_lr=min_lr, eps=eps)
        self.state: np.ndarray | None = None

    def lr_table(self, base_lr, epochs, steps_per_epoch=1):
        raise TypeError("ReduceLROnPlateau depends on the monitored metric and has no lr table; "
                        "use plateau_params(), plateau_state(base_lr) and plateau_step()")

    def plateau_params(self) -> np.ndarray:
        """float64 ``(8,)`` hyperparameters laid out as :data:`PLATEAU_PARAMS`."""
        return np.array([float(self.mode == "max"), self.factor, float(self.patience),
                         self.threshold, float(self.threshold_mode == "abs"),
                         float(self.cooldown), self.min_lr, self.eps], dtype=np.float64)

    def plateau_state(self, base_lr: float) -> np.ndarray:
        """float64 ``(4,)`` initial state laid out as :data:`PLATEAU_STATE`."""
        base_lr = _POS.check("ReduceLROnPlateau.plateau_state base_lr", base_lr)
        worst = -math.inf if self.mode == "max" else math.inf
        return np.array([base_lr, worst, 0.0, 0.0], dtype=np.float64)

    def reset(self, base_lr: float) -> ReduceLROnPlateau:
        """Start the Python reference at ``base_lr``; returns ``self``."""
        self.state = self.plateau_state(base_lr)
        return self

    @property
    def lr(self) -> float:
        """The current learning rate of the Python reference."""
        if self.state is None:
            raise RuntimeError("ReduceLROnPlateau: call reset(base_lr) first")
        return float(self.state[0])

    def step(self, metric: float) -> float:
        """Feed one epoch's metric to the Python reference; returns the next learning rate."""
        if self.state is None:
            raise RuntimeError("ReduceLROnPlateau: call reset(base_lr) before step(metric)")
        return float(plateau_step(self.plateau_params(), self.state, float(metric)))
