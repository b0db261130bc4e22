"""Enums whose members name a thing and build it: ``Optims.ADAM(lr=0.01)`` is ``nnjit.Adam(...)``.

Every member's value is a lowercase string (``Optims.ADAM == "adam"``); that string is what configs
and YAML files hold. Lookup by value or by member name is case-insensitive and accepts ``-`` for
``_``: ``Optims("Adam")``, ``Optims.get("ADAM")``, ``Losses.get("bce-with-logits")``. An unknown
name raises ``ValueError`` that lists the valid ones.

Adding a member is one line: ``NAME = "value", builder``. The builder is what calling the member
runs. The base class is :class:`~nnjit.experiment.builder_enum.BuilderEnum`; :class:`Nets` and
:class:`Activations` live with :class:`~nnjit.experiment.nets.NetConfig` in
:mod:`nnjit.experiment.nets` and are re-exported here.
"""

from __future__ import annotations

import math

from nnjit import schedulers
from nnjit.checks import Int
from nnjit.experiment.builder_enum import BuilderEnum
from nnjit.experiment.nets import Activations, Nets
from nnjit.losses import BCEWithLogitsLoss, CrossEntropyLoss, MSELoss
from nnjit.optim import (
    LBFGS,
    SGD,
    Adadelta,
    Adagrad,
    Adam,
    Adamax,
    AdamW,
    NAdam,
    RAdam,
    RMSprop,
)

__all__ = ["Activations", "BuilderEnum", "Checkpoints", "Devices", "Losses", "Nets", "Optims",
           "Schedulers"]


# -- losses, optimizers, schedulers --------------------------------------------------------------
class Losses(BuilderEnum):
    """Loss functions; ``Losses.MSE()`` is ``nnjit.MSELoss()``."""

    CROSS_ENTROPY = "cross_entropy", CrossEntropyLoss
    MSE = "mse", MSELoss
    BCE_WITH_LOGITS = "bce_with_logits", BCEWithLogitsLoss


class Optims(BuilderEnum):
    """Optimizers; ``Optims.ADAM(lr=0.01)`` is ``nnjit.Adam(lr=0.01)``."""

    SGD = "sgd", SGD
    ADAM = "adam", Adam
    ADAMW = "adamw", AdamW
    RMSPROP = "rmsprop", RMSprop
    ADAGRAD = "adagrad", Adagrad
    ADADELTA = "adadelta", Adadelta
    ADAMAX = "adamax", Adamax
    NADAM = "nadam", NAdam
    RADAM = "radam", RAdam
    LBFGS = "lbfgs", LBFGS  # (full batch: one step per epoch over every training row)


class Schedulers(BuilderEnum):
    """Learning-rate schedulers (:mod:`nnjit.schedulers`); ``Schedulers.STEP(step_size=10)``."""

    STEP = "step", schedulers.StepLR
    EXPONENTIAL = "exponential", schedulers.ExponentialLR
    COSINE = "cosine", schedulers.CosineAnnealingLR
    ONE_CYCLE = "one_cycle", schedulers.OneCycleLR
    LINEAR_WARMUP = "linear_warmup", schedulers.LinearWarmupDecay
    PLATEAU = "plateau", schedulers.ReduceLROnPlateau


# -- devices -------------------------------------------------------------------------------------
def _always() -> bool:
    return True


class Devices(BuilderEnum):
    """Where training runs. Only the CPU today. Each member holds a check of whether it is
    available; ``Devices.get()`` returns the best available device."""

    CPU = "cpu", _always

    def is_available(self) -> bool:
        return bool(self._builder())

    @classmethod
    def get(cls, identifier=None) -> Devices:
        """The device named ``identifier``, or the best available one when it is ``None``.

        Raises:
            ValueError: unknown name, or a device not available on this machine.
        """
        if identifier is None:
            return next(d for d in cls if d.is_available())
        device = super().get(identifier)
        return device()

    def __call__(self) -> Devices:
        """The device itself, after checking that it is available here."""
        if not self.is_available():
            available = [d.value for d in type(self) if d.is_available()]
            raise ValueError(f"device {self.value!r} is not available on this machine; "
                             f"available: {', '.join(available)}")
        return self


# -- checkpoint phases ---------------------------------------------------------------------------
class Checkpoints(BuilderEnum):
    """The checkpoints a run keeps (``checkpoints/<value>.nne``).

    The builder is the fraction of the run, in quarters. A phase is saved at the end of the
    first epoch (0-based index) by whose end at least that fraction of the ``N`` epochs has run:
    ``Qk`` is ``ceil(k * N / 4) - 1``, ``FIRST`` is 0 and ``LAST`` is ``N - 1``. ``BEST`` depends
    on the monitored metric, so it has no fixed epoch.

    Example:
        >>> Checkpoints.phases(10)   # {FIRST: 0, Q1: 2, Q2: 4, Q3: 6, LAST: 9}
        >>> Checkpoints.Q1(10)       # 2; calling a member gives its epoch
    """

    FIRST = "first", 0
    Q1 = "q1", 1
    Q2 = "q2", 2
    Q3 = "q3", 3
    LAST = "last", 4
    BEST = "best", None

    @property
    def filename(self) -> str:
        return f"{self.value}.nne"

    def epoch(self, n_epochs: int) -> int | None:
        """The 0-based epoch after which this phase is saved in a run of ``n_epochs``; ``None``
        for ``BEST``."""
        n = Int(min=1).check("Checkpoints.epoch n_epochs", n_epochs)
        if self._builder is None:
            return None
        return max(math.ceil(self._builder * n / 4) - 1, 0)

    def __call__(self, n_epochs: int) -> int | None:
        return self.epoch(n_epochs)

    @classmethod
    def phases(cls, n_epochs: int) -> dict[Checkpoints, int]:
        """Every fixed phase (all but ``BEST``) with its epoch."""
        return {c: c.epoch(n_epochs) for c in cls if c._builder is not None}

    @classmethod
    def due(cls, epoch: int, n_epochs: int) -> tuple[Checkpoints, ...]:
        """The fixed phases to save at the end of 0-based ``epoch``."""
        return tuple(c for c, e in cls.phases(n_epochs).items() if e == epoch)
