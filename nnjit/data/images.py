"""``ImageDataset``: images (N, C, H, W) and their labels, from NumPy arrays or a class folder.

- ``ImageDataset(images, labels)``: ``images`` of shape (N, C, H, W), or (N, H, W) read as one
  channel, any numeric dtype; ``uint8`` is scaled to [0, 1] (as torchvision's ``ToTensor``),
  other dtypes are kept as they are unless ``scale=`` says otherwise.
- ``ImageDataset.from_folder(root, size=None, mode="RGB")``: one sub-folder per class, as
  torchvision's ``ImageFolder`` (sorted folder names are the class indices), each file decoded
  once with Pillow (the ``images`` extra: ``pip install 'nnjit[images]'``) into one array.

The images are stored once, in the arena dtype (``dtype=``, float32 by default), so a fit copies
batches from them without converting. ``DataLoader(dataset, batch_size=64, shuffle=True)`` and
``trainer.fit(dataset)`` train on them; ``augment=`` (an :class:`~nnjit.data.augment.Augment`)
makes fits on the dataset crop and flip their training batches in the compiled loader.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from nnjit.checks import Choice, Int, Real
from nnjit.data.augment import Augment, check_augment

#: The file extensions ``from_folder`` reads (torchvision's ``IMG_EXTENSIONS``), any case.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")

_CHANNELS = {"RGB": 3, "L": 1}
_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


class ImageDataset:
    """Images and labels for training a model on pictures.

    Args:
        images: array (N, C, H, W), or (N, H, W) for one channel; any numeric dtype, finite.
        labels: class indices (N,) (non-negative ints), or any targets a DataLoader accepts
            ((N,) or (N, K) numbers); None for images without labels (prediction).
        scale: multiply the pixel values by this (> 0); default ``1/255`` for ``uint8`` images
            (so they lie in [0, 1], as torchvision's ``ToTensor``), else 1.
        dtype: the stored dtype, the model's arena dtype: ``np.float32`` (default) or
            ``np.float64``.
        augment: an :class:`~nnjit.data.Augment` for the training batches of fits on this
            dataset (a DataLoader's own ``augment=`` replaces it); None: no augmentation.
        classes: optional class names, ``classes[k]`` the name of class ``k``.

    Attributes:
        images: (N, C, H, W) array of ``dtype``. labels: the labels (int64 for class indices).
        classes, class_to_idx: class names and their indices (as torchvision's ImageFolder;
            empty without names). samples: ``(path, class index)`` per image (folders only).
        augment: the :class:`~nnjit.data.Augment`, or None.
    """

    def __init__(self, images, labels=None, *, scale=None, dtype=np.float32, augment=None,
                 classes=None):
        self.images = _as_images(images, scale, dtype, "ImageDataset")
        self.labels = None if labels is None else _as_labels(labels, len(self.images), classes)
        self.classes = [] if classes is None else [str(c) for c in classes]
        self.class_to_idx = {c: k for k, c in enumerate(self.classes)}
        self.samples: list[tuple[str, int]] = []
        self.augment = check_augment(augment, self.image_dims, "ImageDataset")

    @classmethod
    def from_folder(cls, root, size=None, mode: str = "RGB", *, scale: float = 1 / 255,
                    dtype=np.float32, augment=None,
                    extensions: tuple[str, ...] = IMAGE_EXTENSIONS) -> ImageDataset:
        """Read ``root/<class>/**/<image>`` files: one sub-folder per class.

        Class indices follow the sorted sub-folder names; within a class, files are read in
        sorted order (sub-folders included). Names starting with ``.`` are skipped, and so are
        files whose extension is not in ``extensions``.

        Args:
            root: the folder holding one sub-folder per class.
            size: resize every image to ``(H, W)`` (an int: ``(size, size)``) with bilinear
                interpolation; None: every image must already have the same size.
            mode: ``"RGB"`` (3 channels) or ``"L"`` (grayscale, 1 channel).
            scale, dtype, augment: as for :class:`ImageDataset` (8-bit pixels times ``scale``).

        Raises:
            ImportError: Pillow is not installed (``pip install 'nnjit[images]'``).
            FileNotFoundError: ``root`` is not a folder.
            ValueError: no class sub-folders, a class without images, an unreadable file or two
                sizes without ``size`` (the message names the files).
        """
        image_module = _pillow_image()
        where = "ImageDataset.from_folder"
        mode = Choice(*_CHANNELS).check(f"{where}: mode", mode)
        height_width = _check_size(size, where)
        scale = Real(gt=0).check(f"{where}: scale", scale)
        dtype = _check_dtype(dtype, where)
        classes, samples = _find_samples(root, extensions, where)
        images = _decode_all(image_module, samples, height_width, mode, dtype, scale, where)
        dataset = cls(images, np.array([k for _, k in samples], dtype=np.int64), scale=1.0,
                      dtype=dtype, augment=augment, classes=classes)
        dataset.samples = [(str(path), k) for path, k in samples]
        return dataset

    @property
    def image_dims(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of every image."""
        _, C, H, W = self.images.shape
        return int(C), int(H), int(W)

    @property
    def n_classes(self) -> int:
        """The number of classes: of ``classes`` when named, else the largest label + 1."""
        if self.classes:
            return len(self.classes)
        if self.labels is None or self.labels.ndim != 1 or self.labels.dtype.kind not in "iu":
            raise ValueError("ImageDataset: n_classes needs class names or class-index labels")
        return int(self.labels.max()) + 1

    def flat_images(self) -> np.ndarray:
        """The images as rows of ``C*H*W`` values, (N, C*H*W): a view, no copy."""
        return self.images.reshape(len(self.images), -1)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index):
        """``(image (C, H, W), label)`` of sample ``index`` (label None without labels)."""
        return self.images[index], None if self.labels is None else self.labels[index]

    def __repr__(self) -> str:
        C, H, W = self.image_dims
        return (f"ImageDataset(n_samples={len(self)}, image=(C={C}, H={H}, W={W}), "
                f"dtype={self.images.dtype}, classes={len(self.classes) or None}, "
                f"augment={self.augment})")


# -- arrays ----------------------------------------------------------------------------------------
def _check_dtype(dtype, where: str) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt not in _DTYPES:
        raise ValueError(f"{where}: dtype must be np.float32 or np.float64 (the model's arena "
                         f"dtype), got {dtype!r}")
    return dt


def _as_images(images, scale, dtype, where: str) -> np.ndarray:
    """``images`` as a C-contiguous (N, C, H, W) array of ``dtype``, times ``scale``, finite."""
    images = np.asarray(images)
    dtype = _check_dtype(dtype, where)
    if images.dtype.kind not in "biuf":
        raise ValueError(f"{where}: images must be numeric, got dtype {images.dtype}")
    if images.ndim == 3:
        images = images[:, None]  # (N, H, W): one channel
    if images.ndim != 4:
        raise ValueError(f"{where}: images must have shape (N, C, H, W) or (N, H, W), got "
                         f"{images.shape}")
    if 0 in images.shape:
        raise ValueError(f"{where}: images must not be empty, got shape {images.shape}")
    if scale is None:
        scale = 1 / 255 if images.dtype == np.uint8 else 1.0
    scale = Real(gt=0).check(f"{where}: scale", scale)
    if images.dtype == dtype and scale == 1.0:
        out = np.ascontiguousarray(images)  # (no copy when it already is one)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            out = np.ascontiguousarray(images, dtype=dtype)
            if scale != 1.0:
                out *= dtype.type(scale)
    if out.dtype.kind == "f" and not np.isfinite(out).all():
        index = int(np.argwhere(~np.isfinite(out))[0][0])
        raise ValueError(f"{where}: image {index} has NaN or inf values (after the cast to "
                         f"{dtype} and scale {scale:g})")
    return out


def _as_labels(labels, n: int, classes) -> np.ndarray:
    """Labels checked against ``n`` images (and against ``classes`` when named)."""
    labels = np.asarray(labels)
    if labels.ndim not in (1, 2) or len(labels) != n:
        raise ValueError(f"ImageDataset: labels must have shape ({n},) or ({n}, K) for {n} "
                         f"images, got {labels.shape}")
    if labels.dtype.kind not in "biuf":
        raise ValueError(f"ImageDataset: labels must be numeric, got dtype {labels.dtype}")
    if labels.dtype.kind == "f" and not np.isfinite(labels).all():
        row = int(np.argwhere(~np.isfinite(labels))[0][0])
        raise ValueError(f"ImageDataset: labels contain NaN or inf (first at row {row})")
    if labels.ndim == 1 and labels.dtype.kind in "iu":
        if labels.min() < 0:
            raise ValueError(f"ImageDataset: labels must be class indices >= 0, got "
                             f"{int(labels.min())}")
        labels = labels.astype(np.int64, copy=False)
    if classes is not None:
        if labels.ndim != 1 or labels.dtype.kind not in "iu":
            raise ValueError("ImageDataset: classes names classes: labels must be class indices "
                             "(N,) of ints")
        if int(labels.max()) >= len(classes):
            raise ValueError(f"ImageDataset: label {int(labels.max())} is beyond the "
                             f"{len(classes)} classes named")
    return labels


# -- folders --------------------------------------------------------------------------------------
def _pillow_image():
    """``PIL.Image``, or an ImportError naming the extra."""
    try:
        from PIL import Image
    except ImportError as exc:
        raise ImportError("ImageDataset.from_folder needs Pillow, part of nnjit's 'images' "
                          "extra: pip install 'nnjit[images]'") from exc
    return Image


def _check_size(size, where: str):
    """``size`` as ``(H, W)`` ints >= 1, or None."""
    if size is None:
        return None
    if isinstance(size, (tuple, list)) and len(size) == 2:
        return (Int(min=1).check(f"{where}: size[0] (height)", size[0]),
                Int(min=1).check(f"{where}: size[1] (width)", size[1]))
    side = Int(min=1, says="an int >= 1, a pair (height, width) or None").check(
        f"{where}: size", size)
    return side, side


def _visible_sorted(folder: Path):
    return sorted((e for e in os.scandir(folder) if not e.name.startswith(".")),
                  key=lambda e: e.name)


def _find_samples(root, extensions, where: str):
    """``(classes, [(path, class index)...])`` of a class folder."""
    root = Path(os.fspath(root))
    if not root.is_dir():
        raise FileNotFoundError(f"{where}: {str(root)!r} is not a folder")
    classes = [e.name for e in _visible_sorted(root) if e.is_dir()]
    if not classes:
        raise ValueError(f"{where}: {str(root)!r} has no class sub-folders (expected one "
                         f"sub-folder of images per class, e.g. {root / 'cat'})")
    suffixes = tuple(ext.lower() for ext in extensions)
    samples = []
    for k, name in enumerate(classes):
        found = _image_files(root / name, suffixes)
        if not found:
            raise ValueError(f"{where}: class folder {str(root / name)!r} has no image files "
                             f"(extensions {', '.join(suffixes)})")
        samples.extend((path, k) for path in found)
    return classes, samples


def _image_files(folder: Path, suffixes) -> list[Path]:
    """Image files under ``folder``, sub-folders included, in sorted order."""
    files = []
    for entry in _visible_sorted(folder):
        if entry.is_dir():
            files.extend(_image_files(Path(entry.path), suffixes))
        elif entry.is_file() and entry.name.lower().endswith(suffixes):
            files.append(Path(entry.path))
    return files


def _decode(image_module, path: Path, mode: str, height_width, where: str) -> np.ndarray:
    """One file's 8-bit pixels, (H, W) for "L" or (H, W, 3) for "RGB"."""
    try:
        with image_module.open(path) as img:
            img = img.convert(mode)  # (decodes: a truncated or corrupt file fails here)
            if height_width is not None and img.size != height_width[::-1]:
                img = img.resize(height_width[::-1], image_module.Resampling.BILINEAR)
            return np.asarray(img, dtype=np.uint8)
    except Exception as exc:  # (Pillow raises OSError, ValueError, SyntaxError...: unreadable)
        raise ValueError(f"{where}: cannot read image file {str(path)!r}: {exc}") from exc


def _decode_all(image_module, samples, height_width, mode, dtype, scale, where) -> np.ndarray:
    """Every sample decoded once into one (N, C, H, W) array of ``dtype``, times ``scale``."""
    channels = _CHANNELS[mode]
    images = None
    first = None
    for i, (path, _) in enumerate(samples):
        pixels = _decode(image_module, path, mode, height_width, where)
        if images is None:
            first = (path, pixels.shape[:2])
            images = np.empty((len(samples), channels, *pixels.shape[:2]), dtype=dtype)
        elif pixels.shape[:2] != first[1]:
            (h0, w0), (h, w) = first[1], pixels.shape[:2]
            raise ValueError(f"{where}: images differ in size: {str(first[0])!r} is {w0}x{h0} "
                             f"and {str(path)!r} is {w}x{h} (width x height); pass size=(H, W) "
                             f"to resize them all")
        image = images[i]
        image[...] = pixels if channels == 1 else np.moveaxis(pixels, -1, 0)
        image *= dtype.type(scale)
    return images


