"""Learning-rate schedulers: tables equal torch.optim.lr_scheduler's; so does the plateau rule."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from nnjit.schedulers import (
    PLATEAU_PARAMS,
    PLATEAU_STATE,
    CosineAnnealingLR,
    ExponentialLR,
    LinearWarmupDecay,
    OneCycleLR,
    Param,
    ReduceLROnPlateau,
    Scheduler,
    StepLR,
    plateau_step,
)

ALL = [StepLR, ExponentialLR, CosineAnnealingLR, OneCycleLR, LinearWarmupDecay, ReduceLROnPlateau]
BASE = 0.1


def torch_lrs(make, n_steps, base_lr=BASE):
    """The lr torch uses for each of ``n_steps`` optimizer steps (scheduler stepped after each)."""
    torch = pytest.importorskip("torch")
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=base_lr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sched = make(opt)
        out = []
        for i in range(n_steps):
            out.append(opt.param_groups[0]["lr"])
            opt.step()
            if i < n_steps - 1:  # torch's one-cycle fails on a step past its last
                sched.step()
    return np.array(out)


# -- per-epoch tables vs torch (bit for bit) -----------------------------------------------------
@pytest.mark.parametrize("step_size, gamma, epochs", [(1, 0.5, 6), (3, 0.1, 20), (7, 0.9, 30),
                                                       (50, 0.3, 10)])
def test_step_lr_equals_torch(step_size, gamma, epochs):
    from torch.optim.lr_scheduler import StepLR as TorchStepLR

    got = StepLR(step_size, gamma).lr_table(BASE, epochs)
    want = torch_lrs(lambda o: TorchStepLR(o, step_size=step_size, gamma=gamma), epochs)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("gamma", [0.5, 0.95, 1.0])
def test_exponential_lr_equals_torch(gamma):
    from torch.optim.lr_scheduler import ExponentialLR as TorchExponentialLR

    got = ExponentialLR(gamma).lr_table(BASE, 40)
    np.testing.assert_array_equal(got, torch_lrs(lambda o: TorchExponentialLR(o, gamma), 40))


@pytest.mark.parametrize("t_max, eta_min, epochs", [(10, 0.0, 10), (7, 0.001, 40), (1, 0.0, 5),
                                                     (25, 0.05, 25)])
def test_cosine_equals_torch_including_past_t_max(t_max, eta_min, epochs):
    from torch.optim.lr_scheduler import CosineAnnealingLR as TorchCosine

    got = CosineAnnealingLR(T_max=t_max, eta_min=eta_min).lr_table(BASE, epochs)
    want = torch_lrs(lambda o: TorchCosine(o, T_max=t_max, eta_min=eta_min), epochs)
    np.testing.assert_array_equal(got, want)


def test_cosine_t_max_defaults_to_the_run_length():
    table = CosineAnnealingLR(eta_min=0.01).lr_table(BASE, 12)
    np.testing.assert_array_equal(table, CosineAnnealingLR(T_max=12, eta_min=0.01)
                                  .lr_table(BASE, 12))
    assert table[0] == BASE and table[-1] > 0.01


# -- one-cycle (per optimizer step) --------------------------------------------------------------
@pytest.mark.parametrize("kwargs, epochs, steps", [
    (dict(max_lr=0.5), 4, 9),
    (dict(max_lr=1.0, pct_start=0.25, anneal_strategy="linear"), 3, 11),
    (dict(max_lr=0.3, pct_start=0.4, three_phase=True, div_factor=10.0,
          final_div_factor=100.0), 5, 7),
    (dict(max_lr=0.2, pct_start=0.0), 2, 5),
    (dict(max_lr=0.2, pct_start=1.0), 2, 5),
])
def test_one_cycle_equals_torch(kwargs, epochs, steps):
    from torch.optim.lr_scheduler import OneCycleLR as TorchOneCycle

    got = OneCycleLR(**kwargs).lr_table(BASE, epochs, steps)
    want = torch_lrs(lambda o: TorchOneCycle(o, total_steps=epochs * steps, cycle_momentum=False,
                                             **kwargs), epochs * steps)
    assert got.shape == (epochs * steps,)
    np.testing.assert_array_equal(got, want)


def test_one_cycle_total_steps_and_epochs_follow_torch():
    from torch.optim.lr_scheduler import OneCycleLR as TorchOneCycle

    # a cycle longer than the run: the table is its beginning
    got = OneCycleLR(max_lr=0.4, total_steps=50).lr_table(BASE, 3, 10)
    want = torch_lrs(lambda o: TorchOneCycle(o, max_lr=0.4, total_steps=50,
                                             cycle_momentum=False), 30)
    np.testing.assert_array_equal(got, want)
    got = OneCycleLR(max_lr=0.4, epochs=4).lr_table(BASE, 4, 6)
    want = torch_lrs(lambda o: TorchOneCycle(o, max_lr=0.4, epochs=4, steps_per_epoch=6,
                                             cycle_momentum=False), 24)
    np.testing.assert_array_equal(got, want)


def test_one_cycle_ignores_base_lr_and_handles_a_one_step_warmup():
    sched = OneCycleLR(max_lr=0.5, total_steps=10, pct_start=0.1)  # torch divides 0 by 0 here
    table = sched.lr_table(123.0, 10)
    assert table[0] == 0.5 and np.all(np.diff(table) < 0)
    np.testing.assert_array_equal(table, sched.lr_table(1e-6, 10))


def test_one_cycle_run_longer_than_cycle_is_an_error():
    with pytest.raises(ValueError, match="40 optimizer steps.*only 30"):
        OneCycleLR(max_lr=0.1, total_steps=30).lr_table(BASE, 4, 10)


# -- linear warm-up then decay -------------------------------------------------------------------
@pytest.mark.parametrize("warmup, total, final, epochs", [(3, 10, 0.002, 14), (1, 5, 0.0, 5),
                                                          (5, 6, 0.01, 6), (4, 20, 0.0, 20)])
def test_linear_warmup_matches_torch_sequential_linear(warmup, total, final, epochs):
    from torch.optim.lr_scheduler import LinearLR, SequentialLR

    def make(o):
        return SequentialLR(o, [
            LinearLR(o, start_factor=1 / (warmup + 1), end_factor=1.0, total_iters=warmup),
            LinearLR(o, start_factor=1.0, end_factor=final / BASE, total_iters=total - warmup),
        ], milestones=[warmup])

    got = LinearWarmupDecay(warmup, total, final).lr_table(BASE, epochs)
    np.testing.assert_allclose(got, torch_lrs(make, epochs), rtol=1e-12, atol=1e-15)


def test_linear_decay_without_warmup_matches_torch_linear():
    from torch.optim.lr_scheduler import LinearLR

    got = LinearWarmupDecay(0, final_lr=0.01).lr_table(BASE, 8)
    want = torch_lrs(lambda o: LinearLR(o, start_factor=1.0, end_factor=0.1, total_iters=8), 8)
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("warmup", [0, 1, 2, 5, 19])
def test_warmup_never_yields_zero(warmup):
    table = LinearWarmupDecay(warmup, final_lr=0.0).lr_table(BASE, 20, 3)
    assert np.all(table > 0)
    assert table[0] == pytest.approx(BASE / (warmup + 1))
    assert table[warmup * 3] == BASE  # the base rate is reached at epoch `warmup`
    assert np.all(np.diff(table[: (warmup + 1) * 3]) >= 0)


def test_linear_warmup_clamps_after_total_epochs():
    table = LinearWarmupDecay(2, total_epochs=6, final_lr=0.001).lr_table(BASE, 10)
    np.testing.assert_array_equal(table[6:], 0.001)


# -- table shape rules ---------------------------------------------------------------------------
@pytest.mark.parametrize("sched", [StepLR(2), ExponentialLR(0.9), CosineAnnealingLR(5),
                                   LinearWarmupDecay(2)])
def test_per_epoch_tables_repeat_within_an_epoch(sched):
    one = sched.lr_table(BASE, 6)
    many = sched.lr_table(BASE, 6, steps_per_epoch=4)
    assert many.dtype == np.float64 and many.shape == (24,) and many.flags.c_contiguous
    np.testing.assert_array_equal(many, np.repeat(one, 4))


@pytest.mark.parametrize("args, match", [
    ((0.0, 5), r"lr_table base_lr must be > 0, got 0.0"),
    ((BASE, 0), r"lr_table epochs must be an int >= 1, got 0"),
    ((BASE, 5, 0), r"lr_table steps_per_epoch must be an int >= 1, got 0"),
    ((BASE, 2.5), r"epochs must be an int >= 1"),
])
def test_lr_table_checks_its_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        StepLR(2).lr_table(*args)


# -- validation ----------------------------------------------------------------------------------
@pytest.mark.parametrize("make, match", [
    (lambda: StepLR(0), r"StepLR.step_size must be an int >= 1, got 0"),
    (lambda: StepLR(2.0), r"StepLR.step_size must be an int >= 1, got 2.0"),
    (lambda: StepLR(2, gamma=0), r"StepLR.gamma must be in \(0, 1\], got 0"),
    (lambda: ExponentialLR(1.5), r"ExponentialLR.gamma must be in \(0, 1\], got 1.5"),
    (lambda: ExponentialLR(True), r"ExponentialLR.gamma must be in"),
    (lambda: CosineAnnealingLR(T_max=0), r"CosineAnnealingLR.T_max must be None or an int >= 1"),
    (lambda: CosineAnnealingLR(eta_min=-1.0), r"CosineAnnealingLR.eta_min must be >= 0"),
    (lambda: OneCycleLR(max_lr=-1), r"OneCycleLR.max_lr must be > 0, got -1"),
    (lambda: OneCycleLR(1.0, pct_start=1.5), r"OneCycleLR.pct_start must be in \[0, 1\]"),
    (lambda: OneCycleLR(1.0, anneal_strategy="exp"),
     r"OneCycleLR.anneal_strategy must be one of 'cos', 'linear', got 'exp'"),
    (lambda: OneCycleLR(1.0, div_factor=0), r"OneCycleLR.div_factor must be > 0"),
    (lambda: OneCycleLR(1.0, total_steps=3, epochs=2), r"total_steps or epochs, not both"),
    (lambda: OneCycleLR(1.0, three_phase="yes"), r"OneCycleLR.three_phase must be True or False"),
    (lambda: LinearWarmupDecay(-1), r"LinearWarmupDecay.warmup_epochs must be an int >= 0"),
    (lambda: LinearWarmupDecay(5, total_epochs=5), r"total_epochs \(5\) must be > warmup_epochs"),
    (lambda: LinearWarmupDecay(1, final_lr=-0.1), r"LinearWarmupDecay.final_lr must be >= 0"),
    (lambda: ReduceLROnPlateau(factor=1.0), r"ReduceLROnPlateau.factor must be in \(0, 1\)"),
    (lambda: ReduceLROnPlateau(mode="avg"), r"ReduceLROnPlateau.mode must be one of 'min', 'max'"),
    (lambda: ReduceLROnPlateau(patience=-1), r"ReduceLROnPlateau.patience must be an int >= 0"),
    (lambda: ReduceLROnPlateau(threshold_mode="pct"), r"threshold_mode must be one of"),
    (lambda: ReduceLROnPlateau(min_lr=math.nan), r"min_lr must be a finite number >= 0, got nan"),
])
def test_bad_hyperparameters_name_the_argument_and_range(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_table_time_errors():
    with pytest.raises(ValueError, match=r"the run's epochs \(3\) must be > warmup_epochs \(3\)"):
        LinearWarmupDecay(3).lr_table(BASE, 3)
    with pytest.raises(ValueError, match=r"final_lr \(0.5\) must be <= the base learning rate"):
        LinearWarmupDecay(1, final_lr=0.5).lr_table(BASE, 5)


# -- description ---------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", ALL)
def test_schedulers_describe_themselves(cls):
    required = {"step_size": 3, "gamma": 0.5, "max_lr": 0.2, "warmup_epochs": 2}
    kwargs = {k: required[k] for k in cls.required()}
    sched = cls(**kwargs)
    assert issubclass(cls, Scheduler) and isinstance(cls.name, str)
    assert list(sched.get_config()) == list(cls.params)
    assert set(cls.defaults()) | set(cls.required()) == set(cls.params)
    assert cls(**sched.get_config()) == sched
    assert repr(sched).startswith(f"{cls.__name__}(")
    for key, value in cls.defaults().items():
        assert cls.params[key].check("x", value) == value  # defaults are in range


def test_param_descriptions():
    assert Param("float", low=0.0, low_open=True).describe() == "> 0"
    assert Param("float", low=0.0, high=1.0, high_open=True).describe() == "in [0, 1)"
    assert Param("int", low=1, none_ok=True).describe() == "None or an int >= 1"
    assert Param("float", low=1e-3).describe() == ">= 0.001"


# -- reduce on plateau ---------------------------------------------------------------------------
METRICS = [1.0, 0.9, 0.9, 0.9, 0.9, 0.95, 0.89999, 0.8, 0.8, 0.8, 0.8, 0.8, float("nan"), 0.7,
           0.7, 0.7, 0.7, 0.7, 0.7, 0.71, 0.72] + [0.5] * 14


@pytest.mark.parametrize("kwargs, sign", [
    (dict(), 1),
    (dict(patience=0), 1),
    (dict(patience=2, factor=0.5, cooldown=2), 1),
    (dict(patience=1, factor=0.5, threshold=0.05, threshold_mode="abs"), 1),
    (dict(patience=1, factor=0.3, min_lr=0.005), 1),
    (dict(patience=1, factor=0.5, eps=0.02), 1),
    (dict(mode="max", patience=1, factor=0.5), -1),
    (dict(mode="max", patience=2, threshold=0.01, threshold_mode="abs", cooldown=1), -1),
])
def test_plateau_reference_equals_torch(kwargs, sign):
    torch = pytest.importorskip("torch")
    metrics = [sign * m for m in METRICS]
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=BASE)
    theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
    ours = ReduceLROnPlateau(**kwargs).reset(BASE)
    for m in metrics:
        theirs.step(m)
        assert ours.step(m) == opt.param_groups[0]["lr"]
        assert ours.state[1] == theirs.best or (math.isinf(theirs.best) and
                                                ours.state[1] == theirs.best)
        assert ours.state[2] == theirs.num_bad_epochs
        assert ours.state[3] == theirs.cooldown_counter
    assert ours.lr < BASE  # the sequence did trigger reductions


def test_plateau_vectors_and_misuse():
    sched = ReduceLROnPlateau(mode="max", factor=0.5, patience=3, threshold=0.01,
                              threshold_mode="abs", cooldown=2, min_lr=1e-4, eps=1e-9)
    params = sched.plateau_params()
    assert params.dtype == np.float64 and params.shape == (len(PLATEAU_PARAMS),)
    assert dict(zip(PLATEAU_PARAMS, params, strict=True)) == dict(
        mode_max=1.0, factor=0.5, patience=3.0, threshold=0.01, threshold_abs=1.0, cooldown=2.0,
        min_lr=1e-4, eps=1e-9)
    state = sched.plateau_state(0.3)
    assert state.shape == (len(PLATEAU_STATE),) and list(state) == [0.3, -math.inf, 0.0, 0.0]
    with pytest.raises(RuntimeError, match="reset"):
        sched.step(1.0)
    with pytest.raises(TypeError, match="no lr table"):
        sched.lr_table(BASE, 10)


def test_plateau_step_compiles_with_numba_and_agrees():
    from nnjit.kernels._jit import jit

    compiled = jit(plateau_step, cache=False)
    sched = ReduceLROnPlateau(patience=1, factor=0.5, cooldown=1)
    params = sched.plateau_params()
    s_py, s_nb = sched.plateau_state(BASE), sched.plateau_state(BASE)
    for m in METRICS:
        assert compiled(params, s_nb, m) == plateau_step(params, s_py, m)
        np.testing.assert_array_equal(s_nb, s_py)
