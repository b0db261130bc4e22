"""Pooling layers over NCHW images: ``MaxPool2d``, ``AvgPool2d``, ``AdaptiveAvgPool2d``.

PyTorch's names, arguments, defaults and semantics; the ops are the pooling family's
(:mod:`nnjit.ops.pooling`). Inputs are image tensors ``(B, C, H, W)``: a flat input is read as
images first with ``x.view(-1, C, H, W)``.
"""

from __future__ import annotations

from nnjit.nn import functional as F
from nnjit.nn.module import Module
from nnjit.ops.pooling import adaptive_output, avg_arguments, pool_arguments, pool_geometry
from nnjit.tape.tape import Tensor


def _layer(module: Module) -> str:
    path = module.__dict__.get("_path")
    return f"{type(module).__name__} '{path}'" if path else type(module).__name__


def _check_images(module: Module, x: Tensor) -> None:
    """Errors that name the layer's class and path (the functional forms name the path)."""
    if len(x.dims) != 3:
        raise ValueError(f"{_layer(module)}: expected images of shape (B, C, H, W), got shape "
                         f"{tuple(x.shape)}; read each row as an image first, e.g. "
                         f"x.view(-1, C, H, W)")
    if not isinstance(module, AdaptiveAvgPool2d):
        pool_geometry(x.dims, _layer(module), module.kernel_size, module.stride, module.padding,
                      getattr(module, "dilation", 1), module.ceil_mode)


class MaxPool2d(Module):
    """The max over each ``kernel_size`` window (``torch.nn.MaxPool2d``).

    Args:
        kernel_size: window size, an int or (height, width).
        stride: window step; None (default) is ``kernel_size``.
        padding: implicit -inf padding on each side, at most half the kernel.
        dilation: spacing between the window's taps.
        ceil_mode: round the output size up (a last partial window counts if it starts inside
            the input or the left padding).

    Shapes:
        input ``(B, C, H, W)``, output ``(B, C, OH, OW)`` with
        ``OH = floor((H + 2 * padding - dilation * (kernel_size - 1) - 1) / stride) + 1``
        (ceil with ``ceil_mode``). Gradients go to the first maximum of each window in
        row-major order, as PyTorch's CPU kernel.
    """

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
        super().__init__()
        pool_arguments("MaxPool2d", kernel_size, stride, padding, dilation, ceil_mode)
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.ceil_mode = ceil_mode

    def forward(self, x: Tensor) -> Tensor:
        _check_images(self, x)
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """The mean over each ``kernel_size`` window (``torch.nn.AvgPool2d``).

    Args:
        kernel_size: window size, an int or (height, width).
        stride: window step; None (default) is ``kernel_size``.
        padding: implicit zero padding on each side, at most half the kernel.
        ceil_mode: round the output size up (as :class:`MaxPool2d`).
        count_include_pad: divide by the window with its padding (default) or without it.
        divisor_override: divide every window by this int instead.

    Shapes:
        input ``(B, C, H, W)``, output ``(B, C, OH, OW)`` (as :class:`MaxPool2d`, dilation 1).
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        pool_arguments("AvgPool2d", kernel_size, stride, padding, 1, ceil_mode)
        avg_arguments("AvgPool2d", count_include_pad, divisor_override)
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, x: Tensor) -> Tensor:
        _check_images(self, x)
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """The mean over ``output_size`` windows spanning the image (``torch.nn.AdaptiveAvgPool2d``):
    window ``i`` of ``OH`` covers rows ``floor(i * H / OH)`` to ``ceil((i + 1) * H / OH)``.
    ``AdaptiveAvgPool2d(1)`` is the global average pool.

    Args:
        output_size: ``OH`` and ``OW``: an int or (height, width); None in the pair keeps that
            input size.

    Shapes:
        input ``(B, C, H, W)``, output ``(B, C, OH, OW)``.
    """

    def __init__(self, output_size):
        super().__init__()
        adaptive_output(output_size, (1, 1, 1), "AdaptiveAvgPool2d")
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        _check_images(self, x)
        return F.adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
