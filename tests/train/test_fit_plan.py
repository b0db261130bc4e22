"""FitPlan (fit's checked arguments) and the named views of the compiled loop's rows."""

import dataclasses

import numpy as np
import pytest

from nnjit.graph import interpreter as it
from nnjit.losses import CrossEntropyLoss, MSELoss
from nnjit.optim import SGD
from nnjit.regularizers import SklearnL2Regularizer
from nnjit.schedulers import ReduceLROnPlateau
from nnjit.train.fit_plan import FitPlan
from nnjit.train.run_state import RunConfig, RunState


class _Data:  # what config_row reads of a FitData
    class train:  # noqa: N801 (a stand-in for the loader)
        batch_size, shuffle, drop_last = 16, True, False

    sampled = False


def test_the_plan_is_frozen_and_settles_the_defaults_that_depend_on_each_other():
    plan = FitPlan.build(CrossEntropyLoss(), True, epochs=5, n_iter_no_change=None, verbose=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.epochs = 6
    assert set(vars(plan)) == {field.name for field in dataclasses.fields(FitPlan)}
    assert plan == FitPlan(**vars(plan))
    assert plan.monitor == "val_loss" and plan.patience == 0 and plan.schedule_epochs == 5
    assert plan.per_epoch and not plan.threaded  # verbose=2 prints between epochs
    assert FitPlan.build(MSELoss(), False, verbose=0).monitor == "train_loss"


def test_config_row_puts_every_setting_at_its_field():
    plan = FitPlan.build(CrossEntropyLoss(), True, epochs=7, tol=0.5, n_iter_no_change=3,
                         monitor="val_accuracy", restore_best=False, verbose=0,
                         grad_clip_norm=2.0, accumulation_steps=4)
    cfg = np.zeros(it.CONFIG_WIDTH)
    cfg[:] = plan.config_row(_Data, 64, SGD(lr=0.1), SklearnL2Regularizer(1e-3),
                             np.ones(12), 1.0)
    expected = {it.C_BATCH: 16, it.C_EVAL_BATCH: 64, it.C_SHUFFLE: 1, it.C_DROP_LAST: 0,
                it.C_TOL: 0.5, it.C_PATIENCE: 3, it.C_MONITOR: it.MONITOR_VAL_ACCURACY,
                it.C_RESTORE_BEST: 0, it.C_EPOCHS: 7, it.C_CHUNK: 0, it.C_OPT_KIND: it.OPT_SGD,
                it.C_REG_COEF: 1e-3, it.C_REG_PER_BATCH: 1, it.C_CLIP_NORM: 2.0,
                it.C_ACCUM_STEPS: 4, it.C_PLATEAU: 1, it.C_DENSE_MODE: 1.0}
    assert sorted(expected) == list(range(it.CONFIG_WIDTH))
    assert {k: cfg[k] for k in expected} == pytest.approx(expected)
    assert RunConfig(cfg).monitor == it.MONITOR_VAL_ACCURACY


def test_a_plateau_rule_that_watches_the_wrong_direction_is_refused_before_any_work():
    with pytest.raises(ValueError, match=r"ReduceLROnPlateau\(mode='min'\) does not fit "
                                         r"monitor='val_accuracy'"):
        FitPlan.build(CrossEntropyLoss(), True, monitor="val_accuracy",
                      scheduler=ReduceLROnPlateau(mode="min"))


def test_the_run_state_view_reads_and_writes_the_row_the_compiled_loop_uses():
    row = np.zeros(it.STATE_WIDTH)
    state = RunState(row)
    state.start_fit(step=12, lr=0.01, maximize=True, initial_epoch=3, fit_step=30)
    assert row[it.ST_STEP] == 12 and row[it.ST_BEST] == -np.inf and row[it.ST_JOB] == -1
    assert state.epoch == 3 and state.fit_step == 30 and state.best_epoch == -1
    state.request_stop()
    assert row[it.ST_STOPPED] == it.STOP_AFTER_EPOCH
    state.request_stop(now=True)
    assert row[it.ST_STOPPED] == it.STOP_NOW
    state.clear_stop_request()
    assert row[it.ST_STOPPED] == 0.0 and not state.early_stopped
    state.stopped = 1.0  # early stopping fired: a stop request leaves it as it is
    state.request_stop(now=True)
    assert state.early_stopped
