"""The full set-up of a fit: what :meth:`Trainer.fit` derives before its compiled loop runs.

The arguments become a checked plan (:class:`~nnjit.train.fit_plan.FitPlan`), the training and
validation data are adapted once (:mod:`nnjit.data.adapt`), the model is laid out for them (a
cached layout or a trace: :mod:`nnjit.train.layout_service`) and the plan becomes the run's
options (:class:`~nnjit.engine.run_options.RunOptions`, which alone write the compiled loop's
config row). The result is one :class:`FitSetup`; a plain fit that repeats the last one takes
that set-up again instead (:mod:`nnjit.train.repeat_fit`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from nnjit.data.adapt import FitData, with_validation
from nnjit.data.augment import augmentation_for
from nnjit.ops.normalization import check_batch_statistics
from nnjit.train.fit_arguments import fit_arguments
from nnjit.train.fit_plan import FitPlan
from nnjit.train.lbfgs_fit import fit_lbfgs
from nnjit.train.stateful import stateful_fit_callbacks


class FitSetup(NamedTuple):
    """What a fit derives before its compiled loop runs (the arrays in the arena dtype)."""

    plan: FitPlan
    n_batches: int  # training batches per epoch
    X: np.ndarray
    Y: np.ndarray
    Xv: np.ndarray  # (validation: empty arrays without)
    Yv: np.ndarray
    options: object  # the RunOptions
    steps_per_epoch: int
    lr_table: np.ndarray  # (empty: no scheduler table)
    plateau: np.ndarray  # (empty: no ReduceLROnPlateau)


def set_up_fit(trainer, train, y, epochs, val, batch_size, shuffle, val_dataloader,
               validation_data, validation_split, plan_arguments: dict):
    """The full path of a fit's set-up: the arguments checked into a plan, the data adapted,
    the model laid out, the run's options built. Returns the :class:`FitSetup`, or the
    history of an LBFGS fit, which this runs (Python steps between compiled evaluations)."""
    train, epochs, val = fit_arguments(train, y, epochs, val, batch_size, shuffle,
                                       validation_data, validation_split,
                                       trainer.optimizer.full_batch)
    train, val = with_validation(train, val, val_dataloader, "fit")
    plan_arguments["callbacks"] = stateful_fit_callbacks(trainer.model, train,
                                                         plan_arguments.get("callbacks"))
    plan = FitPlan.build(trainer.loss, val is not None, epochs=epochs, **plan_arguments)
    data = FitData(train, val, trainer._graph_input, trainer.loss, trainer.dtype)

    # Lay the model out for the data; the targets take the width of its outputs.
    Y = trainer._compile(data.specs, data.targets, data.max_rows, "fit",
                         inputs=data.train.inputs)
    program = trainer.program
    if not data.sampled:  # a batch norm refuses training batches of one row
        check_batch_statistics(program, len(data.X), data.train.batch_size,
                               getattr(data.train, "drop_last", False), "fit")
    Xv, Yv = data.validation_arrays(program.output_cols, Y)
    augmentation = augmentation_for(data.train, program.layout, program.input_specs[0].dims)
    distributed = trainer.distributed is not None and trainer.distributed.size > 1
    if distributed:  # (one rank: the plain fit) every rank refuses together, before any work
        trainer.distributed.check_fit(program, data.X, Y, data.train.batch_size,
                                   bool(getattr(data.train, "drop_last", False)),
                                   augmentation is not None, data.structure is not None,
                                   trainer.seed)
    if trainer.optimizer.full_batch:
        return fit_lbfgs(trainer, plan, data, Y, Xv, Yv, augmentation, distributed)

    # The plan becomes the run's options.
    n_batches = len(data.train)
    steps_per_epoch = plan.steps_per_epoch(n_batches)
    lr_table, plateau = plan.schedule(trainer.optimizer.lr, steps_per_epoch)
    options = plan.run_options(
        data, program.max_batch, trainer.optimizer, trainer.regularizer, plateau,
        trainer._dense_mode, augmentation,
        trainer.distributed.run_option(trainer.dtype) if distributed else None)
    return FitSetup(plan, n_batches, data.X, Y, Xv, Yv, options, steps_per_epoch, lr_table,
                    plateau)
