"""save_weights / load_weights: exact round trips and clean failures."""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn


def trained_model():
    nn.set_seed(0)
    X, y = nn.datasets.load_iris()
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    trainer = nn.Trainer(model, nn.Adam(lr=0.01))
    trainer.fit(nn.DataLoader(X, y, batch_size=16), epochs=5, verbose=False)
    return model, trainer, X


def test_round_trip_is_exact_and_predictions_match(tmp_path):
    model, trainer, X = trained_model()
    path = tmp_path / "model.nne"
    model.save_weights(path)
    before = trainer.predict_outputs(X)
    for p in model.parameters():
        p.data[...] = 0
    model.load_weights(path)
    np.testing.assert_array_equal(trainer.predict_outputs(X), before)

    fresh = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    fresh.load_weights(path)
    for (_, a), (_, b) in zip(model.named_parameters(), fresh.named_parameters()):
        np.testing.assert_array_equal(a.data, b.data)


def test_file_records_format_and_metadata(tmp_path):
    from nnjit.io.nne import FORMAT_VERSION, MAGIC, load_nne

    model, _, _ = trained_model()
    path = tmp_path / "m.nne"
    model.save_weights(path)
    raw = path.read_bytes()
    assert raw[:8] == MAGIC
    nne = load_nne(path)
    assert nne.version == FORMAT_VERSION
    assert nne.metadata["model"] == "Sequential"
    assert list(nne.groups["params"]) == ["0.weight", "0.bias", "2.weight", "2.bias"]


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty"])
def test_corrupt_files_fail_cleanly_and_leave_weights(tmp_path, damage):
    model, _, _ = trained_model()
    path = tmp_path / "m.nne"
    model.save_weights(path)
    raw = bytearray(path.read_bytes())
    if damage == "truncate":
        raw = raw[: len(raw) // 2]
    elif damage == "flip":
        raw[len(raw) - 10] ^= 0x40
    elif damage == "garbage":
        raw = bytearray(b"PK\x03\x04 not an nnjit file at all" * 4)
    else:
        raw = bytearray()
    path.write_bytes(bytes(raw))
    before = model.state_dict()
    with pytest.raises(nn.NNEFormatError, match="m.nne"):
        model.load_weights(path)
    for name, arr in model.state_dict().items():
        np.testing.assert_array_equal(arr, before[name])


def test_failed_save_keeps_previous_file(tmp_path, monkeypatch):
    import os

    model, _, _ = trained_model()
    path = tmp_path / "m.nne"
    model.save_weights(path)
    original = path.read_bytes()

    def broken_replace(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        model.save_weights(path)
    assert path.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.nne"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("optimizer", [nn.Adam, nn.NAdam, nn.Adagrad])
def test_trainer_checkpoint_resumes_exactly(tmp_path, dtype, optimizer):
    """6 epochs in one go == 4 epochs, checkpoint, new process-like trainer, 2 more epochs; in
    float64 too, where the fresh model's parameters are float32 until the trainer lays it out
    (loading must not round the checkpoint's float64 values to them). NAdam's state has a third
    row (its momentum product), Adagrad's one."""
    X, y = nn.datasets.load_iris()
    X = nn.datasets.standardize(X)

    def make():
        nn.set_seed(4)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 3))
        return model, nn.Trainer(model, optimizer(lr=0.01), dtype=dtype, seed=9)

    def fit(trainer, epochs):
        trainer.fit(nn.DataLoader(X, y, batch_size=16), epochs=epochs, n_iter_no_change=None,
                    verbose=False)

    straight, trainer = make()
    fit(trainer, 6)

    first, trainer = make()
    fit(trainer, 4)
    trainer.save_checkpoint(tmp_path / "ckpt.nne")
    resumed, trainer = make()
    trainer.load_checkpoint(tmp_path / "ckpt.nne")
    assert trainer.optimizer.iterations == 4 * 10
    fit(trainer, 2)
    for a, b in zip(straight.parameters(), resumed.parameters()):
        np.testing.assert_array_equal(a.data, b.data)


def test_checkpoint_with_other_optimizer_is_rejected(tmp_path):
    model, trainer, _ = trained_model()
    trainer.save_checkpoint(tmp_path / "c.nne")
    other = nn.Trainer(model, nn.SGD(lr=0.1, momentum=0.9))
    before = model.state_dict()
    for p in model.parameters():
        p.data[...] += 1  # differs from the file: a partial load would show
    changed = model.state_dict()
    with pytest.raises(nn.NNEFormatError, match=r"optimizer state of Adam, but this trainer uses "
                                                r"SGD"):
        other.load_checkpoint(tmp_path / "c.nne")
    for name, arr in model.state_dict().items():
        np.testing.assert_array_equal(arr, changed[name])
        assert not np.array_equal(arr, before[name])
