"""``RunOptions``: every option of one run of the compiled loop, as one frozen, checked spec.

A :class:`~nnjit.engine.program.Program`'s layout never changes once it is built; what changes
from run to run (the task, batch sizes, shuffling, early stopping, the optimizer, regularizer,
clipping, accumulation, the plateau rule, the BLAS mode, a fit's augmentation, a data-parallel
fit's MPI handles) is a ``RunOptions``. Its :meth:`RunOptions.config_row` is the only writer of
the compiled loop's config row (the ``C_*`` fields of :mod:`nnjit.engine.fields`), and
:meth:`Program.run <nnjit.engine.program.Program.run>` picks the run's job loader and hooks from
it. ``Trainer`` (fit, predict, evaluate, gradients) and nnjit.sklearn's solver build one per run.

    >>> RunOptions(task=TASK_PREDICT, batch=256, eval_batch=256, dense_mode=MODE_AVX2)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from dataclasses import fields as fields_of

import numpy as np

from nnjit.checks import Bool, Int, Real, is_int, wrong_type
from nnjit.engine import fields
from nnjit.kernels.dense import MODE_AVX2, MODE_AVX512

__all__ = ["Augmentation", "MPIRun", "RunOptions"]

_TASKS = {fields.TASK_FIT: "TASK_FIT", fields.TASK_EVALUATE: "TASK_EVALUATE",
          fields.TASK_PREDICT: "TASK_PREDICT", fields.TASK_GRADIENT: "TASK_GRADIENT"}
_SHUFFLES = {fields.SHUFFLE_OFF: "SHUFFLE_OFF", fields.SHUFFLE_RNG: "SHUFFLE_RNG",
             fields.SHUFFLE_GIVEN: "SHUFFLE_GIVEN"}
_MONITORS = {fields.MONITOR_VAL_LOSS: "MONITOR_VAL_LOSS",
             fields.MONITOR_VAL_ACCURACY: "MONITOR_VAL_ACCURACY",
             fields.MONITOR_TRAIN_LOSS: "MONITOR_TRAIN_LOSS"}
_PLATEAUS = {fields.PLATEAU_OFF: "PLATEAU_OFF", fields.PLATEAU_TORCH: "PLATEAU_TORCH",
             fields.PLATEAU_SKLEARN_ADAPTIVE: "PLATEAU_SKLEARN_ADAPTIVE"}
_DENSE_MODES = {MODE_AVX2: "MODE_AVX2", MODE_AVX512: "MODE_AVX512"}

_POSITIVE, _COUNT, _ANY_INT = Int(min=1), Int(min=0), Int()
_NONNEGATIVE, _FLAG = Real(min=0), Bool()
_TOL = Real(min=0, says="a number >= 0 or math.inf (never improves)")
_PATIENCE = Int(min=0, says="an int >= 0 or math.inf (never stops)")
_HANDLE_LIMIT = 2**53  # a float64 holds every integer below it exactly


def _choice(where: str, value, names: dict) -> None:
    """``value`` one of the int codes ``names`` (``{code: name}``), a NumPy int too."""
    if not (is_int(value) and int(value) in names):
        raise ValueError(f"{where} must be one of " + ", ".join(
            f"{code} ({name})" for code, name in names.items()) + f", got {value!r}")


def _or_inf(rule, where: str, value) -> None:
    """``rule`` (a bound >= 0), or ``math.inf``: never (scikit-learn's ``n_iter_no_change``)."""
    if not (isinstance(value, (float, np.floating)) and value == math.inf):
        rule.check(where, value)


@dataclass(frozen=True, kw_only=True, slots=True)
class Augmentation:
    """A fit's training-batch augmentation: random crop with ``pad`` zeros on each side, then
    a random horizontal flip (``flip``), of the input in arena slot ``slot``, whose rows are
    images of (``channels``, ``height``, ``width``) (:mod:`nnjit.data.augment` makes it)."""

    slot: int
    pad: int
    flip: bool
    channels: int
    height: int
    width: int

    def __post_init__(self):
        for name in ("slot", "pad"):
            _COUNT.check(f"Augmentation: {name}", getattr(self, name))
        _FLAG.check("Augmentation: flip", self.flip)
        for name in ("channels", "height", "width"):
            _POSITIVE.check(f"Augmentation: {name}", getattr(self, name))


@dataclass(frozen=True, kw_only=True, slots=True)
class MPIRun:
    """A data-parallel fit's ranks and this process's MPI handle values (mpi4py's
    ``MPI._handleof``; :meth:`nnjit.distributed.MPI.run_option` makes it): the communicator,
    the arena dtype's datatype, ``MPI_DOUBLE``, ``MPI_SUM`` and ``MPI_IN_PLACE``."""

    ranks: int
    rank: int
    comm: int
    datatype: int
    double: int
    sum: int
    in_place: int

    def __post_init__(self):
        Int(min=2).check("MPIRun: ranks", self.ranks)
        Int(min=0, max=self.ranks - 1).check("MPIRun: rank", self.rank)
        handle = Int(min=-_HANDLE_LIMIT + 1, max=_HANDLE_LIMIT - 1,
                     says="an int of magnitude below 2**53 (exact in the float64 config row)")
        for name in ("comm", "datatype", "double", "sum", "in_place"):
            handle.check(f"MPIRun: {name}", getattr(self, name))


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOptions:
    """The options of one run of the compiled loop (see the module doc). Keyword-only, frozen
    and checked when made: a ValueError (a TypeError for a wrong type) names the option.

    Args:
        task: ``TASK_FIT``, ``TASK_EVALUATE``, ``TASK_PREDICT`` or ``TASK_GRADIENT``.
        batch: rows per training batch (a fit's; GRADIENT takes all rows as one batch).
        eval_batch: rows per batch of validation, evaluate and predict.
        shuffle: ``SHUFFLE_OFF``, ``SHUFFLE_RNG`` (the model's RNG, every epoch) or
            ``SHUFFLE_GIVEN`` (Python's orders in ``perm``).
        drop_last: a fit skips the last, smaller training batch.
        tol, patience, monitor, restore_best: early stopping: an epoch improves when the
            ``MONITOR_*`` value betters the best by more than ``tol``; the fit stops after
            ``patience`` epochs without (0: never; ``math.inf``: never, scikit-learn's way);
            ``restore_best`` puts the best epoch's weights back at the end.
        epochs: the fit's final epoch (absolute: a resumed fit counts the earlier ones).
        chunk: epochs per compiled call (0: all of them in one call).
        optimizer: the optimizer's kind (``nnjit.optim``'s ``kind``, ``OPT_*``).
        reg_coef, reg_per_batch: the L2 penalty's coefficient, divided by the batch's rows when
            ``reg_per_batch`` (scikit-learn's alpha).
        clip_norm: clip the gradient's global norm to this (0: no clipping).
        accumulation_steps: one optimizer step per this many minibatches (mean gradient).
        plateau: ``PLATEAU_OFF``, ``PLATEAU_TORCH`` (ReduceLROnPlateau) or
            ``PLATEAU_SKLEARN_ADAPTIVE``.
        dense_mode: the BLAS kernels in use (``nnjit.kernels.dense.MODE_AVX2``/``MODE_AVX512``).
        augmentation: a fit's :class:`Augmentation` of its training batches, or None.
        mpi: a data-parallel fit's :class:`MPIRun`, or None (this process alone).

    The defaults are those of a run that takes no optimizer step (predict, evaluate).
    """

    task: int
    batch: int
    eval_batch: int
    dense_mode: int
    shuffle: int = fields.SHUFFLE_OFF
    drop_last: bool = False
    tol: float = 0.0
    patience: float = 0
    monitor: int = fields.MONITOR_TRAIN_LOSS
    restore_best: bool = False
    epochs: int = 1
    chunk: int = 0
    optimizer: int = fields.OPT_SGD
    reg_coef: float = 0.0
    reg_per_batch: bool = False
    clip_norm: float = 0.0
    accumulation_steps: int = 1
    plateau: int = fields.PLATEAU_OFF
    augmentation: Augmentation | None = None
    mpi: MPIRun | None = None
    _row: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if not self._plain():  # (the rules below name the option that breaks one)
            self._check()
        augmentation, mpi = self.augmentation, self.mpi
        if augmentation is not None or mpi is not None:
            self._check_fit_extras(self.task, augmentation, mpi)
        object.__setattr__(self, "_row", self._pack())

    def _plain(self) -> bool:
        """Every option a plain Python value in range: what :meth:`_check` would pass, at
        once (every run makes its options; the rules cost several microseconds)."""
        patience = self.patience
        return (type(self.task) is int and self.task in _TASKS
                and type(self.batch) is int and self.batch >= 1
                and type(self.eval_batch) is int and self.eval_batch >= 1
                and type(self.dense_mode) is int and self.dense_mode in _DENSE_MODES
                and type(self.shuffle) is int and self.shuffle in _SHUFFLES
                and type(self.drop_last) is bool and type(self.restore_best) is bool
                and type(self.reg_per_batch) is bool
                and type(self.tol) is float and self.tol >= 0.0  # (inf: never improves)
                and ((type(patience) is int and patience >= 0) or patience == math.inf)
                and type(self.monitor) is int and self.monitor in _MONITORS
                and type(self.epochs) is int and self.epochs >= 1
                and type(self.chunk) is int and self.chunk >= 0
                and type(self.optimizer) is int
                and type(self.reg_coef) is float and 0.0 <= self.reg_coef < math.inf
                and type(self.clip_norm) is float and 0.0 <= self.clip_norm < math.inf
                and type(self.accumulation_steps) is int and self.accumulation_steps >= 1
                and type(self.plateau) is int and self.plateau in _PLATEAUS)

    def _check(self) -> None:
        """Each option by its rule: the first one out of range raises, naming it."""
        _choice("RunOptions: task", self.task, _TASKS)
        _POSITIVE.check("RunOptions: batch", self.batch)
        _POSITIVE.check("RunOptions: eval_batch", self.eval_batch)
        _choice("RunOptions: dense_mode", self.dense_mode, _DENSE_MODES)
        _choice("RunOptions: shuffle", self.shuffle, _SHUFFLES)
        _FLAG.check("RunOptions: drop_last", self.drop_last)
        _or_inf(_TOL, "RunOptions: tol", self.tol)
        _or_inf(_PATIENCE, "RunOptions: patience", self.patience)
        _choice("RunOptions: monitor", self.monitor, _MONITORS)
        _FLAG.check("RunOptions: restore_best", self.restore_best)
        _POSITIVE.check("RunOptions: epochs", self.epochs)
        _COUNT.check("RunOptions: chunk", self.chunk)
        _ANY_INT.check("RunOptions: optimizer", self.optimizer)
        _NONNEGATIVE.check("RunOptions: reg_coef", self.reg_coef)
        _FLAG.check("RunOptions: reg_per_batch", self.reg_per_batch)
        _NONNEGATIVE.check("RunOptions: clip_norm", self.clip_norm)
        _POSITIVE.check("RunOptions: accumulation_steps", self.accumulation_steps)
        _choice("RunOptions: plateau", self.plateau, _PLATEAUS)

    @staticmethod
    def _check_fit_extras(task, augmentation, mpi) -> None:
        for name, value, kind in (("augmentation", augmentation, Augmentation),
                                  ("mpi", mpi, MPIRun)):
            if value is not None and not isinstance(value, kind):
                raise wrong_type(f"RunOptions: {name}", f"an {kind.__name__} or None", value)
            if value is not None and task != fields.TASK_FIT:
                raise ValueError(f"RunOptions: {name} applies to fits (task TASK_FIT) only, "
                                 f"not {_TASKS[task]}")
        if augmentation is not None and mpi is not None:
            raise ValueError("RunOptions: augmentation and mpi have no build together (a "
                             "data-parallel fit refuses augmentation)")

    def _pack(self) -> np.ndarray:
        aug, mpi = self.augmentation, self.mpi
        row = np.array((
            self.batch,  # C_BATCH
            self.eval_batch,  # C_EVAL_BATCH
            self.shuffle,  # C_SHUFFLE
            self.drop_last,  # C_DROP_LAST
            self.tol,  # C_TOL
            self.patience,  # C_PATIENCE
            self.monitor,  # C_MONITOR
            self.restore_best,  # C_RESTORE_BEST
            self.epochs,  # C_EPOCHS
            self.chunk,  # C_CHUNK
            self.optimizer,  # C_OPT_KIND
            self.reg_coef,  # C_REG_COEF
            self.reg_per_batch,  # C_REG_PER_BATCH
            self.clip_norm,  # C_CLIP_NORM
            self.accumulation_steps,  # C_ACCUM_STEPS
            self.plateau,  # C_PLATEAU
            self.dense_mode,  # C_DENSE_MODE
            # C_AUG_SLOT .. C_AUG_W
            *((-1, 0, 0, 0, 0, 0) if aug is None else
              (aug.slot, aug.pad, aug.flip, aug.channels, aug.height, aug.width)),
            # C_MPI_RANKS .. C_MPI_IN_PLACE
            *((0, 0, 0, 0, 0, 0, 0) if mpi is None else
              (mpi.ranks, mpi.rank, mpi.comm, mpi.datatype, mpi.double, mpi.sum, mpi.in_place)),
        ), dtype=np.float64)
        row.flags.writeable = False  # the compiled loop (typed read-only) cannot write it either
        return row

    def config_row(self) -> np.ndarray:
        """The compiled loop's config row (float64, ``C_*`` order, read-only): the only place
        it is written."""
        return self._row

    def __reduce__(self):
        # a copy (pickle, deepcopy) is made anew from the options: NumPy would restore the row
        # writable, and the compiled loop's calls are typed for a read-only one
        return _made_from, ({name: getattr(self, name) for name in _OPTIONS},)


def _made_from(options: dict) -> RunOptions:
    return RunOptions(**options)


_OPTIONS = tuple(f.name for f in fields_of(RunOptions) if f.init)

_ROW_FIELDS = (fields.C_BATCH, fields.C_EVAL_BATCH, fields.C_SHUFFLE, fields.C_DROP_LAST,
               fields.C_TOL, fields.C_PATIENCE, fields.C_MONITOR, fields.C_RESTORE_BEST,
               fields.C_EPOCHS, fields.C_CHUNK, fields.C_OPT_KIND, fields.C_REG_COEF,
               fields.C_REG_PER_BATCH, fields.C_CLIP_NORM, fields.C_ACCUM_STEPS,
               fields.C_PLATEAU, fields.C_DENSE_MODE, fields.C_AUG_SLOT, fields.C_AUG_PAD,
               fields.C_AUG_FLIP, fields.C_AUG_C, fields.C_AUG_H, fields.C_AUG_W,
               fields.C_MPI_RANKS, fields.C_MPI_RANK, fields.C_MPI_COMM, fields.C_MPI_DATATYPE,
               fields.C_MPI_DOUBLE, fields.C_MPI_SUM, fields.C_MPI_IN_PLACE)
if _ROW_FIELDS != tuple(range(fields.CONFIG_WIDTH)):  # (_pack writes the row in this order)
    raise ImportError("nnjit.engine.run_options: the config row no longer matches the C_* "
                      "fields")
