"""The convolutional network of ``NetConfig(kind="cnn")``: :class:`ConvNet` and the arithmetic of
its feature-map sizes (:func:`conv_output_shapes`), checked when the config is made."""

from __future__ import annotations

from nnjit.experiment.dense_stack import dense_stack
from nnjit.nn.module import Module
from nnjit.nn.sequential import Sequential


def conv_output_shapes(in_shape, channels, kernel_sizes, paddings, pool: int):
    """``[(C, H, W)]`` after each ``Conv2d(stride 1) - activation - MaxPool2d(pool)`` stage of a
    ``(C, H, W)`` input, as PyTorch computes them (floor division, no pool padding).

    Raises:
        ValueError: a stage whose output would be empty, naming it.
    """
    _, h, w = in_shape
    shapes = []
    for i, (c, k, p) in enumerate(zip(channels, kernel_sizes, paddings, strict=True)):
        if p != "same":
            h, w = h + 2 * p - k + 1, w + 2 * p - k + 1
        if h < 1 or w < 1:
            raise ValueError(f"NetConfig: conv layer {i} (kernel_size {k}, padding {p}) leaves "
                             f"no output on its {shapes[-1][1:] if shapes else in_shape[1:]} "
                             "input; lower kernel_size or raise padding")
        if pool > 1:
            if h < pool or w < pool:
                raise ValueError(f"NetConfig: the {pool}x{pool} max-pool after conv layer {i} "
                                 f"gets a {h}x{w} map; lower pool or use fewer conv layers")
            h, w = h // pool, w // pool
        shapes.append((c, h, w))
    return shapes


class ConvNet(Module):
    """``features`` (``Conv2d - activation [- MaxPool2d]`` per conv layer) then ``classifier``
    (``Linear - activation [- Dropout]`` per hidden width, then the output ``Linear``) on rows
    holding ``in_shape`` images (a flat row is viewed as ``(C, H, W)``).

    Built from a :class:`~nnjit.experiment.NetConfig` by ``Nets.CNN(config)``.
    """

    def __init__(self, config):
        super().__init__()
        from nnjit import nn

        self.in_shape = tuple(config.in_shape)
        layers = []
        in_channels = self.in_shape[0]
        for c, k, p in zip(config.conv_channels, config.kernel_size, config.padding,
                           strict=True):
            layers += [nn.Conv2d(in_channels, c, k, padding=p), config.activation()]
            if config.pool > 1:
                layers.append(nn.MaxPool2d(config.pool))
            in_channels = c
        self.features = Sequential(*layers)
        c, h, w = conv_output_shapes(self.in_shape, config.conv_channels, config.kernel_size,
                                     config.padding, config.pool)[-1]
        self.classifier = dense_stack(c * h * w, config)

    def forward(self, x):
        x = self.features(x.view(-1, *self.in_shape))
        return self.classifier(x.flatten(1))
