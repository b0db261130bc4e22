"""Enums that build what they name: lookup, error messages, factories, checkpoint phases."""

from __future__ import annotations

import copy

import pytest

import nnjit
from nnjit import schedulers
from nnjit.experiment import (
    Activations,
    Checkpoints,
    Devices,
    Losses,
    NetConfig,
    Nets,
    Optims,
    Schedulers,
)

ENUMS = [Nets, Losses, Optims, Schedulers, Activations, Devices, Checkpoints]


@pytest.mark.parametrize("enum", ENUMS)
def test_values_are_lowercase_strings_and_lookup_is_forgiving(enum):
    for member in enum:
        assert member == member.value and str(member) == member.value == f"{member}"
        assert member.value == member.name.lower()
        assert enum(member.value) is member
        assert enum.get(member) is member
        assert enum.get(member.name) is member  # "LEAKY_RELU"
        assert enum.get(member.value.upper().replace("_", "-")) is member  # "LEAKY-RELU"
        assert copy.deepcopy(member) is member
    assert enum.names() == tuple(m.value for m in enum)


@pytest.mark.parametrize("enum", ENUMS)
@pytest.mark.parametrize("bad", ["nope", "", 3, None])
def test_unknown_names_list_the_valid_ones(enum, bad):
    if enum is Devices and bad is None:
        return  # Devices.get() with no name means "the best available"
    for lookup in (enum, enum.get):
        with pytest.raises(ValueError, match=rf"Unknown {enum.__name__} name") as info:
            lookup(bad)
        for member in enum:
            assert repr(member.value) in str(info.value)


@pytest.mark.parametrize("member, cls", [
    (Optims.SGD, nnjit.SGD), (Optims.ADAM, nnjit.Adam), (Optims.ADAMW, nnjit.AdamW),
    (Optims.RMSPROP, nnjit.RMSprop),
])
def test_optims_build_the_optimizer_with_the_given_arguments(member, cls):
    opt = member(lr=0.01, weight_decay=0.5)
    assert type(opt) is cls and opt.lr == 0.01 and opt.weight_decay == 0.5
    assert member.builder is cls


def test_optims_pass_every_argument_through():
    assert Optims.ADAM(lr=0.01).get_config() == nnjit.Adam(lr=0.01).get_config()
    assert Optims.SGD(lr=0.1, momentum=0.9, nesterov=True).nesterov is True
    assert Optims.ADAMW().weight_decay == 0.01  # the optimizer's own defaults apply
    with pytest.raises(ValueError, match="lr"):
        Optims.ADAM(lr=-1)


@pytest.mark.parametrize("member, cls", [
    (Losses.CROSS_ENTROPY, nnjit.CrossEntropyLoss), (Losses.MSE, nnjit.MSELoss),
    (Losses.BCE_WITH_LOGITS, nnjit.BCEWithLogitsLoss),
])
def test_losses_build_the_loss(member, cls):
    assert type(member()) is cls


@pytest.mark.parametrize("member, cls", [
    (Activations.RELU, nnjit.ReLU), (Activations.LEAKY_RELU, nnjit.LeakyReLU),
    (Activations.ELU, nnjit.ELU), (Activations.SELU, nnjit.SELU), (Activations.TANH, nnjit.Tanh),
    (Activations.SIGMOID, nnjit.Sigmoid), (Activations.SOFTPLUS, nnjit.Softplus),
    (Activations.GELU, nnjit.GELU),
])
def test_activations_build_the_layer(member, cls):
    assert type(member()) is cls


def test_activation_arguments_pass_through():
    assert Activations.LEAKY_RELU(0.2).negative_slope == 0.2
    assert Activations.ELU(alpha=0.5).alpha == 0.5


@pytest.mark.parametrize("member, cls", [
    (Schedulers.STEP, schedulers.StepLR), (Schedulers.EXPONENTIAL, schedulers.ExponentialLR),
    (Schedulers.COSINE, schedulers.CosineAnnealingLR),
    (Schedulers.ONE_CYCLE, schedulers.OneCycleLR),
    (Schedulers.LINEAR_WARMUP, schedulers.LinearWarmupDecay),
    (Schedulers.PLATEAU, schedulers.ReduceLROnPlateau),
])
def test_schedulers_build_the_scheduler_and_share_its_name(member, cls):
    assert member.builder is cls and cls.name == member.value
    assert Schedulers.STEP(step_size=4, gamma=0.5) == schedulers.StepLR(4, 0.5)
    assert Schedulers.ONE_CYCLE(max_lr=0.3, pct_start=0.2).pct_start == 0.2


# -- networks ------------------------------------------------------------------------------------
def _layer_types(net):
    return [type(m).__name__ for m in net]


def test_mlp_builds_linear_activation_dropout_layers():
    cfg = NetConfig(in_dim=8, out_dim=3, hidden_dims=(16, 12), activation="tanh", dropout=0.25)
    net = Nets.MLP(cfg)
    assert isinstance(net, nnjit.Sequential)
    assert _layer_types(net) == ["Linear", "Tanh", "Dropout", "Linear", "Tanh", "Dropout",
                                 "Linear"]
    dims = [(m.in_features, m.out_features) for m in net if isinstance(m, nnjit.Linear)]
    assert dims == [(8, 16), (16, 12), (12, 3)]
    assert all(m.p == 0.25 for m in net if isinstance(m, nnjit.Dropout))
    assert [p.shape for p in net.parameters()] == [(16, 8), (16,), (12, 16), (12,), (3, 12), (3,)]


def test_mlp_without_dropout_or_hidden_layers():
    assert _layer_types(Nets.MLP(NetConfig(in_dim=4, out_dim=2, hidden_dims=[5]))) == [
        "Linear", "ReLU", "Linear"]
    assert _layer_types(Nets.MLP(NetConfig(in_dim=4, out_dim=2))) == ["Linear"]


def test_mlp_from_keywords_and_init_and_misuse():
    net = Nets.MLP(in_dim=4, out_dim=2, hidden_dims=(3,), activation=Activations.GELU,
                   init="torch")
    assert _layer_types(net) == ["Linear", "GELU", "Linear"] and net[0].init == "torch"
    assert NetConfig(in_dim=4, out_dim=2).build().__class__ is nnjit.Sequential
    with pytest.raises(TypeError, match="expected a NetConfig, got dict"):
        Nets.MLP({"in_dim": 4, "out_dim": 2})
    with pytest.raises(TypeError, match="not both"):
        Nets.MLP(NetConfig(in_dim=4, out_dim=2), in_dim=3)


def test_every_member_has_a_builder():
    for enum in ENUMS:
        for member in enum:
            assert member.builder is not None or member is Checkpoints.BEST


# -- devices -------------------------------------------------------------------------------------
def test_devices_best_available_is_the_cpu():
    assert Devices.get() is Devices.CPU
    assert Devices.get("CPU") is Devices.CPU and Devices.CPU() is Devices.CPU
    assert Devices.CPU.is_available()
    with pytest.raises(ValueError, match="valid names: 'cpu'"):
        Devices.get("cuda")


# -- checkpoints ---------------------------------------------------------------------------------
@pytest.mark.parametrize("n, want", [
    (1, dict(first=0, q1=0, q2=0, q3=0, last=0)),
    (4, dict(first=0, q1=0, q2=1, q3=2, last=3)),
    (10, dict(first=0, q1=2, q2=4, q3=7, last=9)),
    (100, dict(first=0, q1=24, q2=49, q3=74, last=99)),
])
def test_checkpoint_phases(n, want):
    assert {c.value: e for c, e in Checkpoints.phases(n).items()} == want
    for c, e in Checkpoints.phases(n).items():
        assert c(n) == c.epoch(n) == e
        assert c in Checkpoints.due(e, n)
        # a quarter phase is the first epoch by whose end k/4 of the run is done
        k = ["first", "q1", "q2", "q3", "last"].index(c.value)
        assert (e + 1) * 4 >= k * n and (k == 0 or e * 4 < k * n)
    assert Checkpoints.BEST.epoch(n) is None
    assert sum(len(Checkpoints.due(e, n)) for e in range(n)) == 5


def test_checkpoint_files_and_bad_epoch_counts():
    assert [c.filename for c in Checkpoints] == ["first.nne", "q1.nne", "q2.nne", "q3.nne",
                                                 "last.nne", "best.nne"]
    assert Checkpoints.due(3, 10) == ()
    with pytest.raises(ValueError, match=r"n_epochs must be an int >= 1, got 0"):
        Checkpoints.Q1.epoch(0)
