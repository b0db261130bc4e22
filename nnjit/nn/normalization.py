"""Normalisation layers: ``BatchNorm1d``, ``BatchNorm2d`` and ``LayerNorm`` (PyTorch's names,
arguments, defaults, parameters and buffers, so a ``state_dict`` maps 1:1 to torch's)."""

from __future__ import annotations

import numpy as np

from nnjit.checks import Int, Real
from nnjit.dtypes import DEFAULT_DTYPE
from nnjit.nn import functional as F
from nnjit.nn.module import Module
from nnjit.nn.parameter import Parameter
from nnjit.tape.tape import Tensor

_FEATURES = Int(min=1, says="a positive int")
_EPS = Real(gt=0)
_MOMENTUM = Real(min=0, max=1)


class _BatchNorm(Module):
    """Batch normalisation per channel; the subclasses say which input shapes they take."""

    _input_dims: tuple[int, ...] = ()  # accepted len(x.dims): channels plus spatial dims
    _input_text = ""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True):
        super().__init__()
        cls = type(self).__name__
        self.num_features = _FEATURES.check(f"{cls}: num_features", num_features)
        self.eps = _EPS.check(f"{cls}: eps", eps)
        self.momentum = None if momentum is None else _MOMENTUM.check(f"{cls}: momentum",
                                                                      momentum)
        self.affine = bool(affine)
        self.track_running_stats = bool(track_running_stats)
        n = self.num_features
        if self.affine:
            self.weight = Parameter(np.ones(n, dtype=DEFAULT_DTYPE))
            self.bias = Parameter(np.zeros(n, dtype=DEFAULT_DTYPE))
        if self.track_running_stats:
            self.register_buffer("running_mean", np.zeros(n, dtype=DEFAULT_DTYPE))
            self.register_buffer("running_var", np.ones(n, dtype=DEFAULT_DTYPE))
            self.register_buffer("num_batches_tracked", np.zeros((), dtype=DEFAULT_DTYPE))

    def reset_running_stats(self) -> None:
        """Running mean 0, variance 1, no batches tracked (PyTorch's)."""
        if self.track_running_stats:
            self.running_mean.data[...] = 0.0
            self.running_var.data[...] = 1.0
            self.num_batches_tracked.data[...] = 0.0

    def forward(self, x: Tensor) -> Tensor:
        cls = type(self).__name__
        where = f"{cls} '{self._path}'" if self._path else cls
        if len(x.dims) not in self._input_dims or x.dims[0] != self.num_features:
            raise ValueError(f"{where}: expected input {self._input_text} with C = "
                             f"{self.num_features} channels, got shape {tuple(x.shape)}")
        tape = x.tape
        params, buffers = self._parameters, self._buffers

        def slot(table, name):
            t = table.get(name)
            return None if t is None else tape.parameter(
                t, f"{self._path}.{name}" if self._path else name)

        return F.batch_norm(x, slot(buffers, "running_mean"), slot(buffers, "running_var"),
                            slot(params, "weight"), slot(params, "bias"), momentum=self.momentum,
                            eps=self.eps, num_batches_tracked=slot(buffers,
                                                                   "num_batches_tracked"))

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of ``(B, C)`` or ``(B, C, L)`` inputs, per channel over the batch
    (and L): PyTorch's ``BatchNorm1d``.

    Training batches of ``fit`` (and :meth:`~nnjit.train.trainer.Trainer.gradients`) normalise
    with the batch's mean and biased variance and update the buffers ``running_mean`` /
    ``running_var`` (``stat = (1 - momentum) * stat + momentum * batch``, the unbiased batch
    variance; ``momentum=None``: a cumulative average over ``num_batches_tracked``); validation,
    ``evaluate`` and ``predict`` normalise with them. The buffers are saved with the weights
    (``state_dict``, ``.nne``, checkpoints) and restored with the best weights. A training
    batch of one row is refused (naming the layer), as PyTorch refuses it.

    Args:
        num_features: C, the channels.
        eps: added to the variance.
        momentum: weight of the batch in the running statistics, or None (cumulative).
        affine: learn ``weight`` (ones) and ``bias`` (zeros), shape ``(C,)``.
        track_running_stats: keep running statistics (else every batch uses its own).
    """

    _input_dims = (1, 2)
    _input_text = "(B, C) or (B, C, L)"


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of images ``(B, C, H, W)``, per channel over the batch and H x W:
    PyTorch's ``BatchNorm2d`` (see :class:`BatchNorm1d` for training and evaluation)."""

    _input_dims = (3,)
    _input_text = "(B, C, H, W)"


class LayerNorm(Module):
    """Normalise over the trailing dims ``normalized_shape`` of each sample, then scale and
    shift elementwise: PyTorch's ``LayerNorm`` (the same in training and evaluation).

    Args:
        normalized_shape: an int or shape; the input's trailing dims must equal it.
        eps: added to the variance.
        elementwise_affine: learn ``weight`` (ones) of shape ``normalized_shape``.
        bias: learn ``bias`` (zeros) too (with ``elementwise_affine``).
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True):
        super().__init__()
        shape = (normalized_shape,) if np.ndim(normalized_shape) == 0 else tuple(
            normalized_shape)
        if not shape:
            raise ValueError("LayerNorm: normalized_shape must name at least one dim")
        self.normalized_shape = tuple(_FEATURES.check("LayerNorm: normalized_shape", d)
                                      for d in shape)
        self.eps = _EPS.check("LayerNorm: eps", eps)
        self.elementwise_affine = bool(elementwise_affine)
        if self.elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, dtype=DEFAULT_DTYPE))
            if bias:
                self.bias = Parameter(np.zeros(self.normalized_shape, dtype=DEFAULT_DTYPE))

    def forward(self, x: Tensor) -> Tensor:
        shape = self.normalized_shape
        if len(shape) > len(x.dims) or tuple(x.dims[len(x.dims) - len(shape):]) != shape:
            where = f"LayerNorm '{self._path}'" if self._path else "LayerNorm"
            raise ValueError(f"{where}: normalized_shape {list(shape)} must equal the input's "
                             f"trailing dims; got input of shape {tuple(x.shape)}")
        tape = x.tape
        params = self._parameters

        def slot(name):
            p = params.get(name)
            return None if p is None else tape.parameter(
                p, f"{self._path}.{name}" if self._path else name)

        return F.layer_norm(x, shape, slot("weight"), slot("bias"), self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")
