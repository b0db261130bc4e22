"""ImageDataset (arrays, class folders read with Pillow) and training-batch augmentation in fits:
on for a fit's training batches, off for validation, evaluate and predict, seeded."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import nnjit as nn
from nnjit.data import Augment, ImageDataset
from nnjit.data.augment import augmentation_for
from nnjit.engine.fields import INPUT_COLUMNS, INPUT_SLOT, LAYOUT_HEAD, LAYOUT_WIDTH
from nnjit.engine.run_options import Augmentation
from nnjit.kernels import augment as ka

# -- arrays ------------------------------------------------------------------------------------


def test_uint8_images_scale_to_unit_range_and_gain_a_channel():
    pixels = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4) * 10
    ds = ImageDataset(pixels, [0, 1])
    assert ds.images.shape == (2, 1, 3, 4) and ds.images.dtype == np.float32
    np.testing.assert_allclose(ds.images[:, 0], pixels / 255.0, rtol=1e-6)
    assert ds.image_dims == (1, 3, 4) and len(ds) == 2 and ds.n_classes == 2
    assert ds.labels.dtype == np.int64
    image, label = ds[1]
    assert image.shape == (1, 3, 4) and label == 1
    assert ds.flat_images().shape == (2, 12) and np.shares_memory(ds.flat_images(), ds.images)


def test_float_images_keep_their_values_unless_scaled():
    images = np.random.default_rng(0).random((3, 2, 4, 4))
    ds = ImageDataset(images, np.zeros(3, dtype=int), dtype=np.float64)
    assert ds.images.dtype == np.float64 and np.array_equal(ds.images, images)
    assert np.shares_memory(ds.images, images)  # (no copy when it already is the arena dtype)
    halved = ImageDataset(images, None, scale=0.5)
    np.testing.assert_allclose(halved.images, images * 0.5, rtol=1e-6)
    assert halved.labels is None and halved.images.dtype == np.float32
    named = ImageDataset(images, [0, 1, 1], classes=["cat", "dog"])
    assert named.classes == ["cat", "dog"] and named.class_to_idx == {"cat": 0, "dog": 1}


@pytest.mark.parametrize("images, labels, kwargs, message", [
    (np.zeros((2, 3)), None, {}, r"images must have shape \(N, C, H, W\) or \(N, H, W\)"),
    (np.zeros((0, 1, 2, 2)), None, {}, "must not be empty"),
    (np.array([[["a"]]]), None, {}, "images must be numeric"),
    (np.full((1, 1, 2, 2), np.nan), None, {}, "image 0 has NaN"),
    (np.zeros((2, 1, 2, 2)), [0], {}, r"labels must have shape \(2,\)"),
    (np.zeros((2, 1, 2, 2)), [0, -1], {}, "class indices >= 0"),
    (np.zeros((2, 1, 2, 2)), [0, 2], {"classes": ["a", "b"]}, "label 2 is beyond the 2 classes"),
    (np.zeros((2, 1, 2, 2)), None, {"scale": 0}, "ImageDataset: scale must be"),
    (np.zeros((2, 1, 2, 2)), None, {"dtype": np.int32}, "dtype must be np.float32 or"),
    (np.zeros((2, 6)), [0, 1], {"augment": Augment(horizontal_flip=True)}, "images must have"),
])
def test_array_errors_name_the_problem(images, labels, kwargs, message):
    with pytest.raises(ValueError, match=message):
        ImageDataset(images, labels, **kwargs)


def test_augment_arguments_are_checked():
    with pytest.raises(ValueError, match="Augment: crop_padding must be an int >= 0"):
        Augment(crop_padding=-1)
    with pytest.raises(TypeError, match="Augment: crop_padding"):
        Augment(crop_padding=1.5)
    with pytest.raises(ValueError, match="Augment: horizontal_flip must be"):
        Augment(horizontal_flip=1)
    flipping = ImageDataset(np.zeros((2, 2, 2)), [0, 1], augment=Augment(horizontal_flip=True))
    assert nn.DataLoader(flipping).augment == Augment(horizontal_flip=True)
    assert nn.DataLoader(flipping, augment=False).augment is None
    assert nn.DataLoader(flipping, augment=Augment(1)).augment == Augment(crop_padding=1)
    with pytest.raises(TypeError, match="augment must be an nnjit.data.Augment"):
        ImageDataset(np.zeros((1, 2, 2)), augment={"crop_padding": 1})
    with pytest.raises(ValueError, match="DataLoader: augment needs images"):
        nn.DataLoader(np.zeros((4, 9)), np.zeros(4), augment=Augment(crop_padding=1))
    with pytest.raises(ValueError, match="an ImageDataset holds its labels"):
        nn.DataLoader(ImageDataset(np.zeros((2, 2, 2)), [0, 1]), [0, 1])


def _layout(slot, cols):
    """A layout vector whose first input entry is (slot, first column 0, cols)."""
    layout = np.zeros(LAYOUT_WIDTH, dtype=np.int64)
    layout[LAYOUT_HEAD + INPUT_SLOT], layout[LAYOUT_HEAD + INPUT_COLUMNS] = slot, cols
    return layout


def test_augmentation_run_option_checks_the_model_input():
    ds = ImageDataset(np.zeros((4, 3, 5, 6)), [0, 1, 0, 1], augment=Augment(2, True))
    loader = nn.DataLoader(ds, batch_size=2)
    expected = Augmentation(slot=7, pad=2, flip=True, channels=3, height=5, width=6)
    assert augmentation_for(loader, _layout(7, 90)) == expected
    assert augmentation_for(loader, _layout(7, 90), (3, 5, 6)) == expected
    with pytest.raises(ValueError, match=r"reads 12 values per sample.*\(C, H, W\) = \(3, 5, 6\)"):
        augmentation_for(loader, _layout(7, 12))
    with pytest.raises(ValueError, match=r"reads its rows as \(3, 6, 5\)"):
        augmentation_for(loader, _layout(7, 90), (3, 6, 5))
    idle = nn.DataLoader(ds, augment=Augment())
    assert augmentation_for(idle, _layout(7, 90)) is None
    plain = nn.DataLoader(np.zeros((4, 90)), np.zeros(4))
    assert augmentation_for(plain, _layout(7, 90)) is None


# -- folders -----------------------------------------------------------------------------------


def _write_png(path, pixels, mode="RGB"):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels, mode).save(path)


@pytest.fixture
def folder(tmp_path):
    """root/cat: 2 RGB images, root/dog: 1 (and a text file, a hidden folder: both ignored)."""
    pytest.importorskip("PIL")
    rng = np.random.default_rng(0)
    pixels = {name: rng.integers(0, 256, (4, 5, 3), dtype=np.uint8)
              for name in ("cat/b.png", "cat/a.png", "dog/x/z.PNG")}
    for name, p in pixels.items():
        _write_png(tmp_path / "root" / name, p)
    (tmp_path / "root" / "dog" / "notes.txt").write_text("not an image")
    _write_png(tmp_path / "root" / ".cache" / "c.png", pixels["cat/a.png"])
    return tmp_path / "root", pixels


def test_folder_classes_samples_and_pixels(folder):
    root, pixels = folder
    ds = ImageDataset.from_folder(root)
    assert ds.classes == ["cat", "dog"] and ds.class_to_idx == {"cat": 0, "dog": 1}
    relative = [Path(p).relative_to(root).as_posix() for p, _ in ds.samples]
    assert relative == ["cat/a.png", "cat/b.png", "dog/x/z.PNG"]
    assert ds.labels.tolist() == [0, 0, 1] and ds.images.shape == (3, 3, 4, 5)
    for i, name in enumerate(("cat/a.png", "cat/b.png", "dog/x/z.PNG")):
        expected = np.moveaxis(pixels[name], -1, 0) * np.float32(1 / 255)
        np.testing.assert_allclose(ds.images[i], expected, rtol=1e-6)
    gray = ImageDataset.from_folder(root, mode="L", dtype=np.float64)
    assert gray.images.shape == (3, 1, 4, 5) and gray.images.dtype == np.float64
    assert 0.0 <= gray.images.min() and gray.images.max() <= 1.0


def test_folder_resizes_to_size(folder):
    root, _ = folder
    assert ImageDataset.from_folder(root, size=3).images.shape == (3, 3, 3, 3)
    assert ImageDataset.from_folder(root, size=(2, 6)).images.shape == (3, 3, 2, 6)
    with pytest.raises(ValueError, match="from_folder: size"):
        ImageDataset.from_folder(root, size=0)
    with pytest.raises(ValueError, match="from_folder: mode must be"):
        ImageDataset.from_folder(root, mode="CMYK")


def test_folder_with_two_sizes_names_both_files(folder):
    root, _ = folder
    _write_png(root / "dog" / "big.png", np.zeros((7, 8, 3), dtype=np.uint8))
    with pytest.raises(ValueError, match=r"a\.png' is 5x4 and '.*big\.png' is 8x7 .*size="):
        ImageDataset.from_folder(root)
    assert ImageDataset.from_folder(root, size=(4, 5)).images.shape == (4, 3, 4, 5)


def test_corrupt_file_is_named(folder):
    root, _ = folder
    bad = root / "dog" / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n not really a png")
    with pytest.raises(ValueError, match=r"cannot read image file '.*broken\.png'"):
        ImageDataset.from_folder(root)


def test_truncated_file_is_named(folder):
    root, pixels = folder
    _write_png(root / "dog" / "cut.png", pixels["cat/a.png"])
    data = (root / "dog" / "cut.png").read_bytes()
    (root / "dog" / "cut.png").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"cannot read image file '.*cut\.png'"):
        ImageDataset.from_folder(root)


def test_empty_folders_are_errors(tmp_path):
    pytest.importorskip("PIL")
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        ImageDataset.from_folder(tmp_path / "missing")
    with pytest.raises(ValueError, match="has no class sub-folders"):
        ImageDataset.from_folder(tmp_path)
    (tmp_path / "cat").mkdir()
    (tmp_path / "cat" / "readme.md").write_text("no images here")
    with pytest.raises(ValueError, match=r"class folder '.*cat' has no image files"):
        ImageDataset.from_folder(tmp_path)


def test_missing_pillow_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)  # (import PIL now raises ImportError)
    with pytest.raises(ImportError, match=r"pip install 'nnjit\[images\]'"):
        ImageDataset.from_folder(tmp_path)


# -- fits --------------------------------------------------------------------------------------

C, H, W = 2, 5, 6


class ImageNet(nn.Module):
    """A linear classifier that reads its rows as (C, H, W) images."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(C * H * W, 3)

    def forward(self, x):
        return self.fc(x.view(-1, C, H, W).flatten(1))


def _images(n=48, seed=0):
    rng = np.random.default_rng(seed)
    images = rng.integers(1, 256, (n, C, H, W), dtype=np.uint8)  # (no zero pixels)
    return images, rng.integers(0, 3, n)


def _trainer(seed=0):
    nn.set_seed(seed)
    return nn.Trainer(ImageNet(), nn.Adam(lr=0.01))


def _input_rows(trainer, n):
    return trainer.program.view(trainer.program.input_slot)[:n].copy()


def test_training_batches_are_augmented_with_the_model_rng_and_nothing_else_is():
    """One training batch of all rows, in order: the input slot holds exactly the images the
    kernel makes with the draws replayed from the trainer's RNG; evaluate and predict load
    the images as they are."""
    images, labels = _images(16)
    ds = ImageDataset(images, labels, augment=Augment(crop_padding=2, horizontal_flip=True))
    loader = nn.DataLoader(ds, batch_size=16, shuffle=False)
    trainer = _trainer()
    trainer.fit(loader, epochs=1, verbose=False)
    state = trainer.program.rng.copy()
    trainer.fit(loader, epochs=1, verbose=False)
    seen = _input_rows(trainer, 16)
    flipped = 0
    for r, (dy, dx, flip) in enumerate(ka.draw_augmentation(state, 2, True) for _ in range(16)):
        expected = ka.augment_reference(ds.images[r], dy, dx, flip)
        np.testing.assert_array_equal(seen[r].reshape(C, H, W), expected)
        flipped += flip
    assert 0 < flipped < 16
    np.testing.assert_array_equal(trainer.program.rng, state)  # (no other draws)
    trainer.evaluate(ds)
    np.testing.assert_array_equal(_input_rows(trainer, 16), ds.flat_images())
    trainer.fit(loader, epochs=1, verbose=False)
    trainer.predict(ds)  # (the model was traced on (N, C, H, W) images: ds or ds.images)
    np.testing.assert_array_equal(_input_rows(trainer, 16), ds.flat_images())


def test_validation_is_not_augmented():
    """The validation loss of a fit equals evaluate on the same data with the same weights."""
    images, labels = _images()
    ds = ImageDataset(images, labels, augment=Augment(crop_padding=1, horizontal_flip=True))
    trainer = _trainer()
    history = trainer.fit(nn.DataLoader(ds, batch_size=16), epochs=2, val=ds, verbose=False,
                          restore_best=False)
    assert history["val_loss"].iloc[-1] == pytest.approx(trainer.evaluate(ds)["loss"], rel=1e-6)


def test_augmentation_is_seeded_and_changes_training():
    images, labels = _images()

    def weights(augment, seed=0):
        trainer = _trainer(seed)
        loader = nn.DataLoader(ImageDataset(images, labels, augment=augment), batch_size=16)
        trainer.fit(loader, epochs=2, verbose=False)
        return trainer.model.state_dict()["fc.weight"].copy()

    augment = Augment(crop_padding=1, horizontal_flip=True)
    np.testing.assert_array_equal(weights(augment), weights(augment))
    assert not np.array_equal(weights(augment), weights(None))
    # Augment() (nothing to do) draws nothing: the same fit as without augmentation
    np.testing.assert_array_equal(weights(Augment()), weights(None))


def test_fit_takes_an_image_dataset_directly():
    images, labels = _images()
    ds = ImageDataset(images, labels)
    trainer = _trainer()
    history = trainer.fit(ds, epochs=3, verbose=False)
    assert len(history) == 3
    assert trainer.predict(ds.images).shape == (len(ds),)
    assert set(trainer.evaluate(ds)) == {"loss", "accuracy"}


def test_zero_nrt_allocations_per_epoch_with_augmentation():
    from tests.helpers import count_allocations

    images, labels = _images(64)
    ds = ImageDataset(images, labels, augment=Augment(crop_padding=2, horizontal_flip=True))
    trainer = _trainer()
    loader = nn.DataLoader(ds, batch_size=8)

    def fit(epochs):
        trainer.fit(loader, epochs=epochs, val=ds, verbose=False, n_iter_no_change=None)

    fit(1)
    two, twelve = count_allocations(fit, repeats=(2, 12))
    assert twelve == two, f"{twelve - two} NRT allocations over 10 extra epochs"
