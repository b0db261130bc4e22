"""``Conv2d``: a 2-D convolution layer on NCHW images (PyTorch's arguments, weights and init)."""

from __future__ import annotations

import math

import numpy as np

from nnjit.checks import Bool, Int
from nnjit.dtypes import DEFAULT_DTYPE
from nnjit.nn.module import Module
from nnjit.nn.parameter import Parameter
from nnjit.ops.conv import pair, padding_of, record_conv2d
from nnjit.random import generator as default_generator
from nnjit.tape.tape import Tensor

_CHANNELS = Int(min=1, says="a positive int")


class Conv2d(Module):
    r"""2-D convolution (cross-correlation, as PyTorch) over ``(batch, C, H, W)`` images.

    Args:
        in_channels: channels of the input image (C).
        out_channels: channels of the output (O).
        kernel_size: an int or a pair ``(kH, kW)``.
        stride: an int or a pair (default 1).
        padding: an int, a pair (zeros on both sides), ``"valid"`` (none) or ``"same"`` (the
            output keeps H and W; stride 1 only; an odd total padding puts the extra pixel at the
            bottom/right, as PyTorch).
        dilation: an int or a pair (default 1).
        groups: split the channels into this many independent groups (divides both channel
            counts; ``groups == in_channels`` is a depthwise convolution).
        bias: learn an additive bias per output channel (default True).
        generator: a ``numpy.random.Generator`` to draw the initial values from; default
            :func:`nnjit.random.generator`.

    Shapes:
        input ``(B, C, H, W)`` (``x.view(-1, C, H, W)`` reads flat rows as images), output
        ``(B, O, OH, OW)``; ``weight`` is ``(O, C / groups, kH, kW)`` and ``bias`` ``(O,)``, as in
        PyTorch, initialised as PyTorch does: :math:`U(-1/\sqrt{k}, 1/\sqrt{k})` with
        :math:`k = C / groups \cdot kH \cdot kW` (``kaiming_uniform_(a=sqrt(5))``).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True,
                 generator: np.random.Generator | None = None):
        super().__init__()
        where = "Conv2d"
        in_channels = _CHANNELS.check(f"{where}: in_channels", in_channels)
        out_channels = _CHANNELS.check(f"{where}: out_channels", out_channels)
        groups = _CHANNELS.check(f"{where}: groups", groups)
        bias = Bool().check(f"{where}: bias", bias)
        if in_channels % groups:
            raise ValueError(f"{where}: in_channels ({in_channels}) must be divisible by groups "
                             f"({groups})")
        if out_channels % groups:
            raise ValueError(f"{where}: out_channels ({out_channels}) must be divisible by "
                             f"groups ({groups})")
        self.kernel_size = pair(kernel_size, "kernel_size", where, 1)
        self.stride = pair(stride, "stride", where, 1)
        self.dilation = pair(dilation, "dilation", where, 1)
        padding_of(padding, self.kernel_size, self.dilation, self.stride, where)  # checks it
        if generator is not None and not isinstance(generator, np.random.Generator):
            raise TypeError(f"{where}: generator must be a numpy.random.Generator or None, got "
                            f"{type(generator).__name__}")
        self.padding = padding if isinstance(padding, str) else pair(padding, "padding", where, 0)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.groups = groups
        rng = default_generator() if generator is None else generator
        shape = (out_channels, in_channels // groups, *self.kernel_size)
        bound = 1.0 / math.sqrt(shape[1] * shape[2] * shape[3])
        self.weight = Parameter(rng.uniform(-bound, bound, shape).astype(DEFAULT_DTYPE))
        self.bias = (Parameter(rng.uniform(-bound, bound, out_channels).astype(DEFAULT_DTYPE))
                     if bias else None)

    def forward(self, x: Tensor) -> Tensor:
        where = f"Conv2d '{self._path or 'Conv2d'}'"
        if not isinstance(x, Tensor):
            raise TypeError(f"{where}: expected a Tensor of shape (batch, {self.in_channels}, H, "
                            f"W), got {type(x).__name__}")
        if len(x.dims) == 3 and x.dims[0] != self.in_channels:
            raise ValueError(f"{where}: expected input with {self.in_channels} channels "
                             f"(in_channels), got shape {x.shape}")
        tape = x.tape
        params = self._parameters  # (self.weight would go through Module.__getattr__)
        w = tape.parameter(params["weight"], self._param_name("weight"))
        bias = params.get("bias")
        b = tape.parameter(bias, self._param_name("bias")) if bias is not None else None
        return record_conv2d(x, w, b, self.out_channels, self.in_channels // self.groups,
                             self.kernel_size, self.stride, self.padding, self.dilation,
                             self.groups, None, where)

    def _param_name(self, name: str) -> str:
        return f"{self._path}.{name}" if self._path else name

    def extra_repr(self) -> str:
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding not in ((0, 0), "valid"):
            text += f", padding={self.padding!r}" if isinstance(self.padding, str) else \
                f", padding={self.padding}"
        if self.dilation != (1, 1):
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        return text + f", bias={self.bias is not None}"
