"""Configs: validation messages, state()/from_state() and YAML round trips, stable run ids."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest
import yaml

import nnjit
from nnjit import schedulers
from nnjit.experiment import (
    Activations,
    Checkpoints,
    Losses,
    ModelConfig,
    NetConfig,
    Nets,
    OptimizerConfig,
    Optims,
    RunConfig,
    SchedulerConfig,
    Schedulers,
    TrainConfig,
)

NET = NetConfig(in_dim=64, out_dim=10)
MODEL = ModelConfig(net=NET)

SCHEDULERS = [
    SchedulerConfig(kind="step", step_size=5),
    SchedulerConfig(kind="step", step_size=2, gamma=0.5),
    SchedulerConfig(kind="exponential", gamma=0.95),
    SchedulerConfig(kind="cosine", T_max=20, eta_min=1e-5),
    SchedulerConfig(kind="cosine"),
    SchedulerConfig(kind="one_cycle", max_lr=0.1, pct_start=0.25, anneal_strategy="linear",
                    div_factor=10, final_div_factor=1e3, three_phase=True, total_steps=500),
    SchedulerConfig(kind="one_cycle", max_lr=0.1, epochs=10),
    SchedulerConfig(kind="linear_warmup", warmup_epochs=3, total_epochs=30, final_lr=1e-6),
    SchedulerConfig(kind="plateau", mode="max", factor=0.5, patience=3, threshold=0.01,
                    threshold_mode="abs", cooldown=2, min_lr=1e-6, eps=1e-9),
]

FULL = RunConfig(
    model=ModelConfig(
        net=NetConfig(in_dim=64, out_dim=10, hidden_dims=(128, 64), activation="leaky_relu",
                      dropout=0.2, init="torch"),
        loss="cross_entropy", device="cpu", dtype="float64"),
    optimizer=OptimizerConfig(kind="adamw", lr=3e-4, weight_decay=0.05, betas=(0.8, 0.99),
                              eps=1e-7, grad_clip_norm=1.0, accumulation_steps=4),
    scheduler=SchedulerConfig(kind="cosine", T_max=50, eta_min=1e-6),
    train=TrainConfig(epochs=50, batch_size=64, seed=7, shuffle=False, monitor="val_accuracy",
                      mode="max", patience=None, min_delta=0.0, restore_best=False,
                      checkpoints=["best", "last"]),
    data="digits",
)

CONFIGS = [NET, MODEL, RunConfig(model=MODEL), FULL, FULL.model, FULL.model.net, FULL.optimizer,
           FULL.train, OptimizerConfig(), TrainConfig(),
           OptimizerConfig(kind="sgd", lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4),
           OptimizerConfig(kind="rmsprop", momentum=0.5, eps=1e-6),
           ModelConfig(net=NetConfig(in_dim=3, out_dim=1), loss="mse"),
           *SCHEDULERS, *(RunConfig(model=MODEL, scheduler=s) for s in SCHEDULERS)]

PLAIN = (str, int, float, bool, type(None))


def _assert_plain(value, path="state"):
    """Only YAML-safe builtins, exactly (no enum members, tuples or numpy scalars)."""
    if isinstance(value, dict):
        for k, v in value.items():
            assert type(k) is str, f"{path}: key {k!r}"
            _assert_plain(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _assert_plain(v, f"{path}[{i}]")
    else:
        assert type(value) in PLAIN, f"{path} is {type(value).__name__}"


# -- round trips ---------------------------------------------------------------------------------
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: type(c).__name__)
def test_state_and_yaml_round_trips_are_exact(cfg):
    cls = type(cfg)
    state = cfg.state()
    _assert_plain(state)
    assert cls.from_state(state) == cfg
    text = cfg.to_yaml()
    assert cls.from_yaml(text) == cfg
    assert cls.from_yaml(text).to_yaml() == text
    assert yaml.safe_load(text) == state  # plain PyYAML reads what we write
    assert cls.from_state(state).config_hash() == cfg.config_hash()
    # the full form (what a run folder records: every field, defaults included) reads back
    # as the same config, with the same hash
    full = cfg.to_yaml(full=True)
    assert cls.from_yaml(full) == cfg and cls.from_yaml(full).config_hash() == cfg.config_hash()
    assert set(yaml.safe_load(full)) == {f.name for f in dataclasses.fields(cfg)}


def test_full_state_holds_only_non_defaults_with_enum_values():
    assert FULL.state() == {
        "model": {"net": {"in_dim": 64, "out_dim": 10, "hidden_dims": [128, 64],
                          "activation": "leaky_relu", "dropout": 0.2, "init": "torch"},
                  "dtype": "float64"},
        "optimizer": {"kind": "adamw", "lr": 3e-4, "weight_decay": 0.05, "betas": [0.8, 0.99],
                      "eps": 1e-7, "grad_clip_norm": 1.0, "accumulation_steps": 4},
        "scheduler": {"kind": "cosine", "T_max": 50, "eta_min": 1e-6},
        "train": {"epochs": 50, "batch_size": 64, "seed": 7, "shuffle": False,
                  "monitor": "val_accuracy", "mode": "max", "patience": None, "min_delta": 0.0,
                  "restore_best": False, "checkpoints": ["last", "best"]},
        "data": "digits",
    }


def test_defaults_are_left_out():
    assert NET.state() == {"in_dim": 64, "out_dim": 10}
    assert RunConfig(model=MODEL).state() == {"model": {"net": {"in_dim": 64, "out_dim": 10}}}
    assert OptimizerConfig().state() == TrainConfig().state() == {}
    assert SchedulerConfig(kind="plateau").state() == {"kind": "plateau"}
    explicit = RunConfig(
        model=ModelConfig(net=NetConfig(in_dim=64, out_dim=10, hidden_dims=[], activation="RELU",
                                        dropout=0, kind="mlp"),
                          loss=Losses.CROSS_ENTROPY, device="cpu", dtype=np.float32),
        optimizer=OptimizerConfig(kind="adam", lr=0.001, betas=[0.9, 0.999], momentum=0,
                                  grad_clip_norm=None, accumulation_steps=1),
        scheduler=None,
        train=TrainConfig(epochs=100, checkpoints=list(reversed(Checkpoints)), patience=10))
    assert explicit.state() == RunConfig(model=MODEL).state()
    assert explicit == RunConfig(model=MODEL)


def test_from_state_fills_defaults_and_yaml_edge_cases():
    assert TrainConfig.from_state({}) == TrainConfig()
    assert OptimizerConfig.from_yaml("") == OptimizerConfig()
    # YAML 1.2 exponent floats (PyYAML alone reads "1e-3" as a string)
    cfg = OptimizerConfig.from_yaml("lr: 1e-3\nweight_decay: 5E-4\ngrad_clip_norm: 1e2\n")
    assert cfg.lr == 1e-3 and cfg.weight_decay == 5e-4 and cfg.grad_clip_norm == 100.0
    assert OptimizerConfig.from_yaml("lr: 1\n").lr == 1.0  # ints become floats
    assert OptimizerConfig(lr=1).config_hash() == OptimizerConfig(lr=1.0).config_hash()


def test_unsafe_yaml_is_refused():
    evil = "!!python/object/apply:os.system ['echo pwned']\n"
    with pytest.raises(yaml.YAMLError):
        RunConfig.from_yaml(evil)
    with pytest.raises(yaml.YAMLError):
        OptimizerConfig.from_yaml("lr: !!python/object/apply:float ['0.1']\n")


# -- hashes --------------------------------------------------------------------------------------
def test_hash_is_stable_and_short():
    # Golden value: sha256 of {"model":{"net":{"in_dim":64,"out_dim":10}}} (sha256sum agrees).
    # A change here changes every existing run id: only change it on purpose.
    assert RunConfig(model=MODEL).config_hash() == "212b5cfb5723"
    h = FULL.config_hash()
    assert len(h) == 12 and all(c in "0123456789abcdef" for c in h)
    assert RunConfig.from_yaml(FULL.to_yaml()).config_hash() == h
    assert FULL.replace(data="digits").config_hash() == h


def test_explicit_defaults_and_key_order_do_not_change_the_hash():
    base = RunConfig(model=MODEL)
    assert base.replace(optimizer=OptimizerConfig(lr=0.001)).config_hash() == base.config_hash()
    assert base.replace(train=TrainConfig(seed=0, batch_size=32)).config_hash() == \
        base.config_hash()
    state = FULL.state()
    shuffled = {k: state[k] for k in reversed(state)}
    shuffled["train"] = {k: state["train"][k] for k in reversed(state["train"])}
    assert RunConfig.from_state(shuffled).config_hash() == FULL.config_hash()


def test_hash_changes_with_any_value_that_matters():
    base = RunConfig(model=MODEL)
    variants = [
        base.replace(optimizer=OptimizerConfig(lr=0.002)),
        base.replace(train=TrainConfig(seed=1)),
        base.replace(model=ModelConfig(net=NET.replace(hidden_dims=(32,)))),
        base.replace(scheduler=SchedulerConfig(kind="step", step_size=3)),
        base.replace(data="iris"),
    ]
    hashes = {v.config_hash() for v in variants} | {base.config_hash()}
    assert len(hashes) == len(variants) + 1


# -- normalisation -------------------------------------------------------------------------------
def test_names_become_members_and_numbers_are_normalised():
    net = NetConfig(in_dim=np.int64(4), out_dim=2, hidden_dims=[np.int32(3)], activation="TANH",
                    dropout=np.float32(0.5), kind="MLP")
    assert net.activation is Activations.TANH and net.kind is Nets.MLP
    assert type(net.in_dim) is int and net.hidden_dims == (3,) and type(net.hidden_dims[0]) is int
    assert type(net.dropout) is float
    assert ModelConfig(net=net, dtype=np.float64).dtype == "float64"
    assert ModelConfig(net=net, dtype="f4").numpy_dtype == np.float32
    opt = OptimizerConfig(kind="ADAMW", betas=[0.5, 0.6])
    assert opt.kind is Optims.ADAMW and opt.betas == (0.5, 0.6)
    assert SchedulerConfig(kind="Linear-Warmup", warmup_epochs=1).kind is Schedulers.LINEAR_WARMUP
    assert TrainConfig(checkpoints=["BEST", Checkpoints.FIRST]).checkpoints == (
        Checkpoints.FIRST, Checkpoints.BEST)
    assert TrainConfig(checkpoints=[]).checkpoints == ()


def test_configs_are_frozen_keyword_only_and_replace_validates():
    with pytest.raises(dataclasses.FrozenInstanceError):
        NET.in_dim = 3
    with pytest.raises(TypeError):
        NetConfig(64, 10)
    with pytest.raises(ValueError, match="NetConfig.dropout"):
        NET.replace(dropout=1.0)
    assert hash(FULL) == hash(RunConfig.from_state(FULL.state()))


# -- building ------------------------------------------------------------------------------------
def test_optimizer_config_builds_the_optimizer():
    adam = FULL.optimizer.build()
    assert type(adam) is nnjit.AdamW
    assert (adam.lr, adam.weight_decay, adam.betas, adam.eps) == (3e-4, 0.05, (0.8, 0.99), 1e-7)
    assert OptimizerConfig(kind="adamw").build().weight_decay == 0.01  # its own default
    sgd = OptimizerConfig(kind="sgd", lr=0.1, momentum=0.9, nesterov=True).build()
    assert type(sgd) is nnjit.SGD and sgd.nesterov and sgd.momentum == 0.9
    assert type(OptimizerConfig(kind="rmsprop", momentum=0.3).build()) is nnjit.RMSprop


@pytest.mark.parametrize("cfg", SCHEDULERS, ids=lambda c: c.kind.value)
def test_scheduler_config_builds_the_scheduler(cfg):
    sched = cfg.build()
    assert type(sched) is cfg.kind.builder
    for key, value in cfg.scheduler_kwargs().items():
        assert getattr(sched, key) == value


def test_scheduler_config_has_a_field_for_every_scheduler_hyperparameter():
    names = {f.name for f in dataclasses.fields(SchedulerConfig)}
    for kind in Schedulers:
        missing = set(kind.builder.params) - names
        assert not missing, f"add SchedulerConfig fields {missing} for {kind.value!r}"


def test_model_config_builds_net_and_loss():
    net = FULL.model.build()
    assert isinstance(net, nnjit.Sequential) and isinstance(net[1], nnjit.LeakyReLU)
    assert type(FULL.model.build_loss()) is nnjit.CrossEntropyLoss
    assert type(ModelConfig(net=NET, loss="mse").build_loss()) is nnjit.MSELoss


# -- errors --------------------------------------------------------------------------------------
BAD = [
    # (config class, kwargs, message regex)
    (NetConfig, dict(in_dim=0, out_dim=2), r"NetConfig.in_dim must be an int >= 1, got 0"),
    (NetConfig, dict(in_dim=2.5, out_dim=2), r"NetConfig.in_dim must be an int >= 1, got 2.5"),
    (NetConfig, dict(in_dim=True, out_dim=2), r"NetConfig.in_dim must be an int >= 1, got True"),
    (NetConfig, dict(in_dim=2, out_dim=-1), r"NetConfig.out_dim must be an int >= 1, got -1"),
    (NetConfig, dict(in_dim=2, out_dim=2, hidden_dims=64),
     r"NetConfig.hidden_dims must be a list of ints >= 1 \(e.g. \[64, 32\]\), got 64"),
    (NetConfig, dict(in_dim=2, out_dim=2, hidden_dims=[8, 0]),
     r"NetConfig.hidden_dims\[1\] must be an int >= 1, got 0"),
    (NetConfig, dict(in_dim=2, out_dim=2, activation="swish"),
     r"NetConfig.activation: Unknown Activations name 'swish'; valid names: 'relu', "
     r"'leaky_relu'"),
    (NetConfig, dict(in_dim=2, out_dim=2, dropout=1.0),
     r"NetConfig.dropout must be in \[0, 1\), got 1.0"),
    (NetConfig, dict(in_dim=2, out_dim=2, dropout=-0.1), r"NetConfig.dropout must be in \[0, 1\)"),
    (NetConfig, dict(in_dim=2, out_dim=2, kind="gcn"), r"NetConfig.kind: .*valid names: 'mlp'"),
    (NetConfig, dict(in_dim=2, out_dim=2, init="he"),
     r"NetConfig.init must be one of 'glorot_uniform', 'torch', got 'he'"),
    (NetConfig, dict(in_dim=2, out_dim=2, heads=0), r"NetConfig.heads must be an int >= 1"),
    (NetConfig, dict(in_dim=4, out_dim=2, kind="cnn", in_shape=[1, 2], conv_channels=[2]),
     r"NetConfig.in_shape must be \[C, H, W\]"),
    (NetConfig, dict(in_dim=4, out_dim=2, kind="cnn", in_shape=[1, 2, 2], conv_channels=[0]),
     r"NetConfig.conv_channels\[0\] must be an int >= 1"),
    (NetConfig, dict(in_dim=4, out_dim=2, kind="cnn", in_shape=[1, 2, 2], conv_channels=[2],
                     kernel_size=[1, 1]), r"NetConfig.kernel_size must give one value per conv"),
    (NetConfig, dict(in_dim=4, out_dim=2, kind="cnn", in_shape=[1, 2, 2], conv_channels=[2],
                     padding=-1), r"NetConfig.padding must be an int >= 0 or \"same\""),
    (NetConfig, dict(in_dim=4, out_dim=2, kind="cnn", in_shape=[1, 2, 2], conv_channels=[2],
                     pool=0), r"NetConfig.pool must be an int >= 1"),
    (NetConfig, dict(in_dim=4, out_dim=2, kind="lstm", in_shape=[2, 2], hidden_size=0),
     r"NetConfig.hidden_size must be an int >= 1, got 0"),
    (NetConfig, dict(in_dim=4, out_dim=2, kind="gru", in_shape=[2, 2], hidden_size=3,
                     num_layers=0), r"NetConfig.num_layers must be an int >= 1, got 0"),
    (NetConfig, dict(in_dim=4, out_dim=2, kind="rnn", in_shape=[2, 2], hidden_size=3,
                     bidirectional=1), r"NetConfig.bidirectional must be True or False"),
    (NetConfig, dict(in_dim=2, out_dim=2, aggr="median"),
     r"NetConfig.aggr must be one of 'mean', 'max', 'sum', got 'median'"),
    (ModelConfig, dict(net={"in_dim": 2, "out_dim": 2}),
     r"ModelConfig.net must be a NetConfig, got dict"),
    (ModelConfig, dict(net=NET, loss="hinge"), r"ModelConfig.loss: .*valid names: "
                                              r"'cross_entropy', 'mse', 'bce_with_logits'"),
    (ModelConfig, dict(net=NET, device="cuda"), r"ModelConfig.device: .*valid names: 'cpu'"),
    (ModelConfig, dict(net=NET, dtype="float16"),
     r"ModelConfig.dtype must be one of 'float32', 'float64', got 'float16'"),
    (ModelConfig, dict(net=NET, dtype="fp32"), r"ModelConfig.dtype must be one of"),
    (ModelConfig, dict(net=NetConfig(in_dim=2, out_dim=1)),
     r"ModelConfig.loss 'cross_entropy' needs net.out_dim >= 2"),
    (OptimizerConfig, dict(lr=-1), r"OptimizerConfig.lr must be > 0, got -1"),
    (OptimizerConfig, dict(lr=0), r"OptimizerConfig.lr must be > 0, got 0"),
    (OptimizerConfig, dict(lr="0.1"), r"OptimizerConfig.lr must be a number > 0, got '0.1'"),
    (OptimizerConfig, dict(lr=float("nan")), r"OptimizerConfig.lr must be a finite number > 0"),
    (OptimizerConfig, dict(kind="lion"), r"OptimizerConfig.kind: Unknown Optims name 'lion'; "
                                         r"valid names: 'sgd', 'adam', 'adamw', 'rmsprop'"),
    (OptimizerConfig, dict(max_iter=5), r"OptimizerConfig.max_iter does not apply to kind "
                                        r"'adam' \(it applies to: lbfgs\)"),
    (OptimizerConfig, dict(kind="lbfgs", max_iter=0),
     r"OptimizerConfig.max_iter must be None or an int >= 1, got 0"),
    (OptimizerConfig, dict(kind="lbfgs", max_eval=1.5), r"OptimizerConfig.max_eval must be"),
    (OptimizerConfig, dict(kind="lbfgs", tolerance_grad=-1),
     r"OptimizerConfig.tolerance_grad must be None or >= 0, got -1"),
    (OptimizerConfig, dict(kind="lbfgs", tolerance_change="small"),
     r"OptimizerConfig.tolerance_change must be"),
    (OptimizerConfig, dict(kind="lbfgs", history_size=0),
     r"OptimizerConfig.history_size must be None or an int >= 1, got 0"),
    (OptimizerConfig, dict(kind="lbfgs", line_search_fn="armijo"),
     r"OptimizerConfig.line_search_fn must be"),
    (OptimizerConfig, dict(kind="lbfgs", weight_decay=0.1),
     r"OptimizerConfig.weight_decay does not apply to kind 'lbfgs'"),
    (OptimizerConfig, dict(kind="lbfgs", grad_clip_norm=1.0),
     r"OptimizerConfig.grad_clip_norm does not apply to kind 'lbfgs'"),
    (OptimizerConfig, dict(kind="lbfgs", accumulation_steps=2),
     r"OptimizerConfig.accumulation_steps does not apply to kind 'lbfgs'"),
    (RunConfig, dict(model=MODEL, optimizer=OptimizerConfig(kind="lbfgs"),
                     scheduler=SchedulerConfig(kind="step", step_size=2)),
     r"RunConfig.scheduler does not apply to optimizer kind 'lbfgs'"),
    (OptimizerConfig, dict(weight_decay=-0.1),
     r"OptimizerConfig.weight_decay must be None or >= 0, got -0.1"),
    (OptimizerConfig, dict(betas=(0.9,)), r"OptimizerConfig.betas must be a pair"),
    (OptimizerConfig, dict(betas=(0.9, 1.0)),
     r"OptimizerConfig.betas\[1\] must be in \[0, 1\), got 1.0"),
    (OptimizerConfig, dict(eps=0), r"OptimizerConfig.eps must be > 0, got 0"),
    (OptimizerConfig, dict(kind="sgd", momentum=1.0),
     r"OptimizerConfig.momentum must be in \[0, 1\), got 1.0"),
    (OptimizerConfig, dict(nesterov=1), r"OptimizerConfig.nesterov must be True or False"),
    (OptimizerConfig, dict(grad_clip_norm=0),
     r"OptimizerConfig.grad_clip_norm must be None or > 0, got 0"),
    (OptimizerConfig, dict(accumulation_steps=0),
     r"OptimizerConfig.accumulation_steps must be an int >= 1, got 0"),
    (OptimizerConfig, dict(kind="sgd", betas=(0.8, 0.9)),
     r"OptimizerConfig.betas does not apply to kind 'sgd' \(it applies to: adam, adamw, "
     r"adamax, nadam, radam\)"),
    (OptimizerConfig, dict(kind="adam", momentum=0.9),
     r"OptimizerConfig.momentum does not apply to kind 'adam' \(it applies to: sgd, rmsprop\)"),
    (OptimizerConfig, dict(kind="sgd", nesterov=True), r"OptimizerConfig: SGD: Nesterov"),
    (SchedulerConfig, dict(), r"missing 1 required keyword-only argument: 'kind'"),
    (SchedulerConfig, dict(kind="warmup"), r"SchedulerConfig.kind: Unknown Schedulers name "
                                           r"'warmup'; valid names: 'step', 'exponential'"),
    (SchedulerConfig, dict(kind="step"),
     r"SchedulerConfig.step_size is required for kind 'step' \(an int >= 1\)"),
    (SchedulerConfig, dict(kind="exponential"), r"SchedulerConfig.gamma is required"),
    (SchedulerConfig, dict(kind="one_cycle"), r"SchedulerConfig.max_lr is required"),
    (SchedulerConfig, dict(kind="step", step_size=2, T_max=4),
     r"SchedulerConfig.T_max does not apply to kind 'step'; its fields are: step_size, gamma"),
    (SchedulerConfig, dict(kind="step", step_size=0),
     r"SchedulerConfig.step_size must be an int >= 1, got 0"),
    (SchedulerConfig, dict(kind="step", step_size=1, gamma=1.5),
     r"SchedulerConfig.gamma must be in \(0, 1\], got 1.5"),
    (SchedulerConfig, dict(kind="cosine", T_max=0),
     r"SchedulerConfig.T_max must be None or an int >= 1, got 0"),
    (SchedulerConfig, dict(kind="cosine", eta_min=-1), r"SchedulerConfig.eta_min must be >= 0"),
    (SchedulerConfig, dict(kind="one_cycle", max_lr=0), r"SchedulerConfig.max_lr must be > 0"),
    (SchedulerConfig, dict(kind="one_cycle", max_lr=1, pct_start=2),
     r"SchedulerConfig.pct_start must be in \[0, 1\], got 2"),
    (SchedulerConfig, dict(kind="one_cycle", max_lr=1, anneal_strategy="exp"),
     r"SchedulerConfig.anneal_strategy must be one of 'cos', 'linear'"),
    (SchedulerConfig, dict(kind="one_cycle", max_lr=1, total_steps=5, epochs=5),
     r"SchedulerConfig: OneCycleLR: pass total_steps or epochs, not both"),
    (SchedulerConfig, dict(kind="linear_warmup", warmup_epochs=-1),
     r"SchedulerConfig.warmup_epochs must be an int >= 0"),
    (SchedulerConfig, dict(kind="linear_warmup", warmup_epochs=5, total_epochs=4),
     r"total_epochs \(4\) must be > warmup_epochs \(5\)"),
    (SchedulerConfig, dict(kind="plateau", factor=1),
     r"SchedulerConfig.factor must be in \(0, 1\), got 1"),
    (SchedulerConfig, dict(kind="plateau", mode="up"), r"SchedulerConfig.mode must be one of"),
    (SchedulerConfig, dict(kind="plateau", patience=-1),
     r"SchedulerConfig.patience must be an int >= 0, got -1"),
    (SchedulerConfig, dict(kind="plateau", cooldown=1.5), r"SchedulerConfig.cooldown must be an"),
    (TrainConfig, dict(epochs=0), r"TrainConfig.epochs must be an int >= 1, got 0"),
    (TrainConfig, dict(batch_size=0), r"TrainConfig.batch_size must be an int >= 1, or null "
                                      r"for every training row in one batch, got 0"),
    (TrainConfig, dict(seed=-1), r"TrainConfig.seed must be an int >= 0, got -1"),
    (TrainConfig, dict(seed=None), r"TrainConfig.seed must be an int >= 0, got None"),
    (TrainConfig, dict(shuffle="yes"), r"TrainConfig.shuffle must be True or False"),
    (TrainConfig, dict(monitor=""), r"TrainConfig.monitor must be None or a metric name"),
    (TrainConfig, dict(mode="up"), r"TrainConfig.mode must be one of 'auto', 'min', 'max'"),
    (TrainConfig, dict(patience=-1), r"TrainConfig.patience must be None or an int >= 0"),
    (TrainConfig, dict(min_delta=-1e-3), r"TrainConfig.min_delta must be >= 0"),
    (TrainConfig, dict(restore_best=None), r"TrainConfig.restore_best must be True or False"),
    (TrainConfig, dict(checkpoints="best"), r"TrainConfig.checkpoints must be a list of "
                                            r"checkpoint names.*valid: first, q1"),
    (TrainConfig, dict(checkpoints=["best", "worst"]),
     r"TrainConfig.checkpoints\[1\]: Unknown Checkpoints name 'worst'; valid names: 'first'"),
    (TrainConfig, dict(checkpoints=["best", "BEST"]),
     r"TrainConfig.checkpoints lists 'best' twice"),
    (RunConfig, dict(model={"net": {}}), r"RunConfig.model must be a ModelConfig, got dict"),
    (RunConfig, dict(model=MODEL, optimizer=None),
     r"RunConfig.optimizer must be an OptimizerConfig, got NoneType"),
    (RunConfig, dict(model=MODEL, scheduler="step"),
     r"RunConfig.scheduler must be a SchedulerConfig or None, got str"),
    (RunConfig, dict(model=MODEL, data=""), r"RunConfig.data must be None or a data set name"),
    (RunConfig, dict(model=MODEL, train=TrainConfig(epochs=5),
                     scheduler=SchedulerConfig(kind="linear_warmup", warmup_epochs=5)),
     r"SchedulerConfig.warmup_epochs \(5\) must be < TrainConfig.epochs \(5\)"),
]


@pytest.mark.parametrize("cls, kwargs, match", BAD,
                         ids=[f"{c.__name__}-{'-'.join(k) or 'empty'}" for c, k, _ in BAD])
def test_bad_values_raise_naming_the_field_and_range(cls, kwargs, match):
    error = TypeError if match.startswith("missing") else ValueError
    with pytest.raises(error, match=match):
        cls(**kwargs)


def test_every_field_has_a_bad_value_test():
    tested = {(cls.__name__, key) for cls, kwargs, _ in BAD for key in kwargs}
    for cls in (NetConfig, ModelConfig, OptimizerConfig, SchedulerConfig, TrainConfig, RunConfig):
        for f in dataclasses.fields(cls):
            if cls is SchedulerConfig and f.name not in ("kind", "step_size", "gamma", "T_max",
                                                          "eta_min", "max_lr", "pct_start",
                                                          "anneal_strategy", "total_steps",
                                                          "warmup_epochs", "factor", "mode",
                                                          "patience", "cooldown"):
                continue  # the remaining ones share the checked Param specs
            assert (cls.__name__, f.name) in tested, f"no bad-value test: {cls.__name__}.{f.name}"


def test_from_state_rejects_unknown_and_missing_keys_and_non_mappings():
    with pytest.raises(ValueError, match=r"OptimizerConfig: unknown key 'learning_rate'; valid "
                                         r"keys: kind, lr, weight_decay, betas"):
        OptimizerConfig.from_state({"learning_rate": 0.1})
    with pytest.raises(ValueError, match=r"NetConfig: unknown keys 'a', 'b'"):
        NetConfig.from_state({"in_dim": 1, "out_dim": 2, "a": 1, "b": 2})
    with pytest.raises(ValueError, match=r"NetConfig: missing required keys 'in_dim', 'out_dim'"):
        RunConfig.from_state({"model": {"net": {}}})
    with pytest.raises(ValueError, match=r"RunConfig: missing required key 'model'"):
        RunConfig.from_yaml("optimizer: {lr: 0.1}\n")
    with pytest.raises(ValueError, match=r"RunConfig.from_state expects a mapping, got list"):
        RunConfig.from_yaml("- 1\n- 2\n")
    with pytest.raises(ValueError, match=r"TrainConfig: unknown key 'tol'"):
        RunConfig.from_state({"model": MODEL.state(), "train": {"tol": 0.1}})


def test_docstring_lists_every_field():
    for cls in (NetConfig, ModelConfig, OptimizerConfig, TrainConfig, RunConfig):
        doc = inspect.getdoc(cls)
        for f in dataclasses.fields(cls):
            assert f"{f.name}:" in doc, f"{cls.__name__} docstring misses {f.name}"
    for kind in Schedulers:
        for name in kind.builder.params:
            assert name in inspect.getdoc(SchedulerConfig)
    assert schedulers.Scheduler  # the scheduler module is the source of SchedulerConfig's ranges


_HUGE = "x" * 100_000


@pytest.mark.parametrize("build, where", [
    (lambda: TrainConfig(monitor=[_HUGE]), "TrainConfig.monitor"),
    (lambda: TrainConfig(mode=_HUGE), "TrainConfig.mode"),
    (lambda: TrainConfig(checkpoints=[_HUGE]), "TrainConfig.checkpoints[0]"),
    (lambda: TrainConfig(checkpoints=list(range(100_000))), "TrainConfig.checkpoints[0]"),
    (lambda: TrainConfig(epochs=10 ** 5000), "TrainConfig.epochs"),  # repr() fails on it
    (lambda: NetConfig(in_dim=1, out_dim=2, hidden_dims=[_HUGE]), "NetConfig.hidden_dims[0]"),
    (lambda: NetConfig(in_dim=1, out_dim=2, hidden_dims=_HUGE), "NetConfig.hidden_dims"),
    (lambda: NetConfig(in_dim=1, out_dim=2, activation=_HUGE), "NetConfig.activation"),
    (lambda: NetConfig(in_dim=[0] * 100_000, out_dim=2), "NetConfig.in_dim"),
    (lambda: ModelConfig(net=NET, dtype=_HUGE), "ModelConfig.dtype"),
    (lambda: OptimizerConfig(betas=[0.1] * 100_000), "OptimizerConfig.betas"),
    (lambda: OptimizerConfig(betas=[_HUGE, 0.1]), "OptimizerConfig.betas[0]"),
    (lambda: RunConfig(model=MODEL, data=[_HUGE]), "RunConfig.data"),
    (lambda: RunConfig.from_state({"model": MODEL.state(), _HUGE: 1}), "RunConfig: unknown"),
    (lambda: RunConfig.from_state({"model": MODEL.state(), **{f"k{i}": 1 for i in range(10**4)}}),
     "RunConfig: unknown keys 'k0', 'k1'"),
    (lambda: NetConfig.from_yaml(f"in_dim: 1\nout_dim: 2\nkind: '{_HUGE[:60_000]}'\n"),
     "NetConfig.kind"),
])
def test_errors_quote_a_bounded_excerpt_of_the_value(build, where):
    with pytest.raises(ValueError) as info:
        build()
    message = str(info.value)
    assert message.startswith(where), message[:300]
    assert len(message) < 700, (len(message), message[:300])


def test_excerpts_say_how_long_the_value_was():
    with pytest.raises(ValueError, match=r"got 'xxxx.*'\.\.\. \(100000 characters\)$"):
        TrainConfig(mode=_HUGE)
    with pytest.raises(ValueError, match=r"unknown keys 'k0', .*'k9' and 9990 more; valid"):
        RunConfig.from_state({"model": MODEL.state(), **{f"k{i}": 1 for i in range(10**4)}})
    with pytest.raises(ValueError, match=r"got an int of 16610 bits"):
        TrainConfig(epochs=10 ** 5000)
    with pytest.raises(ValueError, match=r"^TrainConfig.monitor must be None or a metric name "
                                         r"such as 'val_loss', got 3$"):
        TrainConfig(monitor=3)  # a short value is quoted whole, as before


def test_a_long_value_from_yaml_is_quoted_briefly():
    with pytest.raises(ValueError, match=r"RunConfig.data must be None or a data set name or "
                                         r"path, got \['xxx.*\.\.\. \(1 items\)") as info:
        RunConfig.from_yaml(f"model: {MODEL.state()}\ndata: ['{_HUGE[:60_000]}']\n")
    assert len(str(info.value)) < 400
