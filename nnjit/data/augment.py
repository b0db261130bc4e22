"""``Augment``: random crop with zero padding and horizontal flip of training images, applied by
the compiled loader to every training batch as it is copied into the arena.

``DataLoader(images, labels, augment=Augment(crop_padding=4, horizontal_flip=True))`` (or an
:class:`~nnjit.data.images.ImageDataset` built with ``augment=``) makes every fit on that loader
augment its training batches; validation, ``evaluate``, ``predict`` and ``gradients`` never do.
The draws come from the trainer's RNG (:mod:`nnjit.kernels.augment`), so a seed fixes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnjit.checks import Bool, Int
from nnjit.engine.fields import INPUT_COLUMNS, INPUT_ENTRY_WIDTH, INPUT_SLOT, LAYOUT_HEAD
from nnjit.engine.run_options import Augmentation


@dataclass(frozen=True)
class Augment:
    """Training-batch image augmentation (off unless given to a loader or an ImageDataset).

    Args:
        crop_padding: pad each image with this many zeros on every side, then crop it back to
            its size at a uniformly random offset: torchvision's
            ``RandomCrop((H, W), padding=crop_padding)`` (0: no crop).
        horizontal_flip: mirror each image left to right with probability 1/2: torchvision's
            ``RandomHorizontalFlip()``, Keras' ``RandomFlip("horizontal")``.

    The crop comes first, then the flip, as in the usual torchvision ``Compose``. Each image of
    each training batch gets its own draws from the trainer's RNG.
    """

    crop_padding: int = 0
    horizontal_flip: bool = False

    def __post_init__(self):
        object.__setattr__(self, "crop_padding",
                           Int(min=0).check("Augment: crop_padding", self.crop_padding))
        object.__setattr__(self, "horizontal_flip",
                           Bool().check("Augment: horizontal_flip", self.horizontal_flip))

    @property
    def active(self) -> bool:
        """Whether it changes any image (a crop padding > 0 or the flip)."""
        return self.crop_padding > 0 or self.horizontal_flip


def check_augment(augment, image_dims, where: str) -> Augment | None:
    """``augment`` (an :class:`Augment`, or None / False for none) checked for data whose rows
    are images of ``image_dims`` ``(C, H, W)`` (None: not images). ``where`` names the caller."""
    if augment is None or augment is False:
        return None
    if not isinstance(augment, Augment):
        raise TypeError(f"{where}: augment must be an nnjit.data.Augment, None or False, got "
                        f"{type(augment).__name__}")
    if image_dims is None:
        raise ValueError(f"{where}: augment needs images: an ImageDataset or X of shape "
                         f"(N, C, H, W), not rows of features")
    return augment


def augmentation_for(loader, layout: np.ndarray, input_dims=None) -> Augmentation | None:
    """The run option (:class:`~nnjit.engine.run_options.Augmentation`) of a fit on ``loader``
    by a program with ``layout``: augment the model's first input (its layout entry: slot and
    values per row), whose rows must be the loader's images (read as ``input_dims`` when the
    traced input's dims are known). None when the loader does not augment."""
    augment = getattr(loader, "augment", None)
    if augment is None or not augment.active:
        return None
    C, H, W = loader.image_dims
    entry = layout[LAYOUT_HEAD : LAYOUT_HEAD + INPUT_ENTRY_WIDTH]
    cols = int(entry[INPUT_COLUMNS])
    if cols != C * H * W:
        raise ValueError(f"fit: augment applies to the model's first input, which reads {cols} "
                         f"values per sample, not the data's images of (C, H, W) = {(C, H, W)}")
    if input_dims is not None and len(input_dims) > 1 and tuple(input_dims) != (C, H, W):
        raise ValueError(f"fit: augment needs the model's first input to be the images "
                         f"(C, H, W) = {(C, H, W)}, but it reads its rows as {tuple(input_dims)}")
    return Augmentation(slot=int(entry[INPUT_SLOT]), pad=augment.crop_padding,
                        flip=augment.horizontal_flip, channels=C, height=H, width=W)
