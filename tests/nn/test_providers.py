"""Module's convenience methods run what the layers above nn register (nnjit.nn.providers)."""

import numpy as np
import pytest

import nnjit as nn
from nnjit.nn import providers


def test_import_nnjit_registers_every_implementation():
    assert set(providers._IMPLEMENTATIONS) == set(providers.PROVIDED_BY)
    trainer = providers.provider("inference_trainer", "test")(nn.Linear(2, 3))
    assert isinstance(trainer, nn.Trainer) and trainer.seed == 0


def test_a_method_whose_provider_is_not_imported_says_what_to_import(monkeypatch, tmp_path):
    monkeypatch.delitem(providers._IMPLEMENTATIONS, "save_onnx")
    with pytest.raises(RuntimeError, match=r"^Linear.save_onnx needs nnjit.export.onnx_export, "
                                           r"which is not imported: import nnjit"):
        nn.Linear(2, 3).save_onnx(tmp_path / "m.onnx")
    monkeypatch.delitem(providers._IMPLEMENTATIONS, "inference_trainer")
    with pytest.raises(RuntimeError, match=r"^Sequential.predict needs nnjit.train.trainer"):
        nn.Sequential(nn.Linear(2, 3)).predict(np.zeros((1, 2), np.float32))
    assert not (tmp_path / "m.onnx").exists()


def test_an_unknown_implementation_is_refused():
    with pytest.raises(KeyError, match="unknown implementation 'fit'"):
        providers.provide("fit", print)


def test_summary_needs_no_provider(monkeypatch):
    """Module.summary traces with nnjit.nn.trace, in nn: no trainer is borrowed."""
    monkeypatch.delitem(providers._IMPLEMENTATIONS, "inference_trainer")
    text = nn.Sequential(nn.Linear(2, 3), nn.ReLU()).summary_str()
    assert "(None, 3)" in text
