"""FitPlan (fit's checked arguments), the RunOptions it makes, and the named view of the run
state row."""

import dataclasses

import numpy as np
import pytest

from nnjit.engine import fields
from nnjit.engine.run_options import RunOptions
from nnjit.losses import CrossEntropyLoss, MSELoss
from nnjit.optim import SGD
from nnjit.regularizers import SklearnL2Regularizer
from nnjit.schedulers import ReduceLROnPlateau
from nnjit.train.fit_plan import FitPlan
from nnjit.train.run_state import RunState


class _Data:  # what run_options reads of a FitData
    class train:  # noqa: N801 (a stand-in for the loader)
        batch_size, shuffle, drop_last = 16, True, False

    sampled = False
    X = np.zeros((100, 1))  # (the batch is capped at the rows)


def test_the_plan_is_frozen_and_settles_the_defaults_that_depend_on_each_other():
    plan = FitPlan.build(CrossEntropyLoss(), True, epochs=5, n_iter_no_change=None, verbose=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.epochs = 6
    assert set(vars(plan)) == {field.name for field in dataclasses.fields(FitPlan)}
    assert plan == FitPlan(**vars(plan))
    assert plan.monitor == "val_loss" and plan.patience == 0 and plan.schedule_epochs == 5
    assert plan.per_epoch and not plan.threaded  # verbose=2 prints between epochs
    assert FitPlan.build(MSELoss(), False, verbose=0).monitor == "train_loss"


def test_the_plan_makes_the_fits_run_options():
    plan = FitPlan.build(CrossEntropyLoss(), True, epochs=7, tol=0.5, n_iter_no_change=3,
                         monitor="val_accuracy", restore_best=False, verbose=0,
                         grad_clip_norm=2.0, accumulation_steps=4)
    options = plan.run_options(_Data, 64, SGD(lr=0.1), SklearnL2Regularizer(1e-3), np.ones(12), 1)
    assert options == RunOptions(
        task=fields.TASK_FIT, batch=16, eval_batch=64, shuffle=fields.SHUFFLE_RNG, tol=0.5,
        patience=3, monitor=fields.MONITOR_VAL_ACCURACY, restore_best=False, epochs=7,
        optimizer=fields.OPT_SGD, reg_coef=1e-3, reg_per_batch=True, clip_norm=2.0,
        accumulation_steps=4, plateau=fields.PLATEAU_TORCH, dense_mode=1)
    # a fit with the same settings shares them (they are immutable)
    assert plan.run_options(_Data, 64, SGD(lr=0.2), SklearnL2Regularizer(1e-3), np.ones(12),
                            1) is options
    assert plan.run_options(_Data, 64, SGD(lr=0.1), None, np.ones(0), 1) == RunOptions(
        task=fields.TASK_FIT, batch=16, eval_batch=64, shuffle=fields.SHUFFLE_RNG, tol=0.5,
        patience=3, monitor=fields.MONITOR_VAL_ACCURACY, restore_best=False, epochs=7,
        optimizer=fields.OPT_SGD, clip_norm=2.0, accumulation_steps=4, dense_mode=1)


def test_a_plateau_rule_that_watches_the_wrong_direction_is_refused_before_any_work():
    with pytest.raises(ValueError, match=r"ReduceLROnPlateau\(mode='min'\) does not fit "
                                         r"monitor='val_accuracy'"):
        FitPlan.build(CrossEntropyLoss(), True, monitor="val_accuracy",
                      scheduler=ReduceLROnPlateau(mode="min"))


def test_the_run_state_view_reads_and_writes_the_row_the_compiled_loop_uses():
    row = np.zeros(fields.STATE_WIDTH)
    state = RunState(row)
    state.start_fit(step=12, lr=0.01, maximize=True, initial_epoch=3, fit_step=30)
    assert row[fields.ST_STEP] == 12 and row[fields.ST_BEST] == -np.inf and row[fields.ST_JOB] == -1
    assert state.epoch == 3 and state.fit_step == 30 and state.best_epoch == -1
    state.request_stop()
    assert row[fields.ST_STOPPED] == fields.STOP_AFTER_EPOCH
    state.request_stop(now=True)
    assert row[fields.ST_STOPPED] == fields.STOP_NOW
    state.clear_stop_request()
    assert row[fields.ST_STOPPED] == 0.0 and not state.early_stopped
    state.stopped = 1.0  # early stopping fired: a stop request leaves it as it is
    state.request_stop(now=True)
    assert state.early_stopped


@pytest.mark.parametrize("kw, message", [
    (dict(epochs=0), "fit: epochs must be an int >= 1, got 0"),
    (dict(epochs=5, initial_epoch=5), "fit: initial_epoch must be an int in [0, epochs) = [0, 5) "
                                      "(epochs is the final epoch, as in Keras), got 5"),
    (dict(initial_epoch=np.int64(-1)), "fit: initial_epoch must be an int in [0, epochs) = "
                                       "[0, 100) (epochs is the final epoch, as in Keras), got -1"),
    (dict(initial_epoch=1.0), "fit: initial_epoch must be an int >= 0, got 1.0 (float)"),
    (dict(schedule_epochs=0), "fit: schedule_epochs must be an int >= 1 or None, got 0"),
    (dict(tol=float("nan")), "fit: tol must be a finite number >= 0, got nan"),
    (dict(tol=-1), "fit: tol must be a finite number >= 0, got -1"),
    (dict(n_iter_no_change=-1), "fit: n_iter_no_change must be an int >= 0 or None, got -1"),
    (dict(grad_clip_norm=0), "fit: grad_clip_norm must be a number > 0 or None, got 0"),
    (dict(grad_clip_norm=float("inf")), "fit: grad_clip_norm must be a number > 0 or None, "
                                        "got inf"),
    (dict(accumulation_steps=0), "fit: accumulation_steps must be an int >= 1, got 0"),
])
def test_each_argument_out_of_range_is_named(kw, message):
    with pytest.raises(ValueError) as info:
        FitPlan.build(CrossEntropyLoss(), False, **kw)
    assert str(info.value) == message


def test_numbers_of_other_types_are_normalised_by_the_rules():
    plan = FitPlan.build(CrossEntropyLoss(), False, epochs=np.int64(6), initial_epoch=np.int8(2),
                         schedule_epochs=np.int64(9), tol=0, n_iter_no_change=np.int16(3),
                         grad_clip_norm=2, accumulation_steps=np.int64(4))
    got = {k: getattr(plan, k) for k in ("epochs", "initial_epoch", "schedule_epochs", "tol",
                                         "patience", "grad_clip_norm", "accumulation_steps")}
    assert got == dict(epochs=6, initial_epoch=2, schedule_epochs=9, tol=0.0, patience=3,
                       grad_clip_norm=2.0, accumulation_steps=4)
    assert [type(v) for v in got.values()] == [int, int, int, float, int, float, int]
