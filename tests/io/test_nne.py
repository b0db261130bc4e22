"""The .nne checkpoint format: exact round trip, atomic writes, corruption, check_state."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from nnjit.io import nne
from nnjit.io.nne import (
    NNEFile,
    NNEFormatError,
    StateMismatchError,
    check_state,
    load_nne,
    save_nne,
)

# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

MAGIC = b"\x89NNE\r\n\x1a\n"


def _bits(a: np.ndarray) -> bytes:
    """The exact bytes of ``a`` in little-endian C order (compares NaN payloads, -0.0, ...)."""
    return np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes()


def _assert_same(groups_in, loaded: NNEFile) -> None:
    assert list(loaded.groups) == list(groups_in)
    for g, tensors in groups_in.items():
        assert list(loaded.groups[g]) == list(tensors)
        for name, a in tensors.items():
            b = loaded.groups[g][name]
            assert b.shape == a.shape, (g, name)
            assert b.dtype == a.dtype.newbyteorder("="), (g, name)
            assert _bits(b) == _bits(a), (g, name)


def _craft(
    header: bytes | dict,
    payload: bytes = b"",
    *,
    version: int = 1,
    reserved: int = 0,
    header_len: int | None = None,
    payload_len: int | None = None,
    pad: bool = True,
) -> bytes:
    """Build a file by hand from docs/nne-format.md (not with the writer), with a valid checksum."""
    hb = header if isinstance(header, bytes) else json.dumps(header).encode()
    if pad:
        hb += b" " * (-len(hb) % 64)
        payload += b"\0" * (-len(payload) % 64)
    hl = len(hb) if header_len is None else header_len
    pl = len(payload) if payload_len is None else payload_len
    prefix = MAGIC + struct.pack("<IIQQ", version, reserved, hl, pl)
    digest = hashlib.sha256(prefix + hb + payload).digest()
    return prefix + digest + hb + payload


def _record(name="w", group="params", dtype="<f4", shape=(2,), offset=0, nbytes=None):
    if nbytes is None:
        nbytes = int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize
    return {"name": name, "group": group, "dtype": dtype, "shape": list(shape),
            "offset": offset, "nbytes": nbytes}


def _header(*records, groups=("params",), metadata=None):
    return {"groups": list(groups), "tensors": list(records), "metadata": metadata or {}}


def _expect_error(path: Path, *fragments: str) -> NNEFormatError:
    with pytest.raises(NNEFormatError) as info:
        load_nne(path)
    msg = str(info.value)
    assert str(path) in msg
    for frag in fragments:
        assert frag in msg, msg
    assert isinstance(info.value, ValueError)
    return info.value


SAMPLE_GROUPS = {
    "params": {
        "fc1.weight": np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
        "fc1.bias": np.array([1.5, -2.5, np.inf], dtype=np.float32),
        "scale": np.array([0.25], dtype=np.float64),
    },
    "optimizer": {
        "m": np.linspace(-1, 1, 17, dtype=np.float64),
        "step": np.array([123456789012], dtype=np.int64),
    },
}
SAMPLE_META = {"nnjit_version": "0.1.0", "model": "MLP", "epoch": 7,
               "optimizer": {"name": "adam", "lr": 0.001, "betas": [0.9, 0.999]}}


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> tuple[Path, bytes]:
    path = tmp_path_factory.mktemp("nne") / "sample.nne"
    save_nne(path, SAMPLE_GROUPS, SAMPLE_META)
    return path, path.read_bytes()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """A path hypothesis examples overwrite (function-scoped fixtures don't mix with @given)."""
    return tmp_path_factory.mktemp("scratch") / "bad.nne"


# --------------------------------------------------------------------------------------------
# round trip
# --------------------------------------------------------------------------------------------


def test_round_trip_exact(tmp_path):
    groups = {
        "params": {
            "w32": np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32),
            "w64": np.random.default_rng(1).standard_normal((2, 3, 4)),
            "i64": np.array([-(2**63), -1, 0, 2**63 - 1], dtype=np.int64),
            "i32": np.array([[-7, 9]], dtype=np.int32),
            "u8": np.arange(255, dtype=np.uint8),
            "scalar_1": np.array([3.25], dtype=np.float64),
            "scalar_0d": np.array(2.5, dtype=np.float32),
            "empty": np.zeros((0, 3), dtype=np.float32),
            "empty_1d": np.zeros(0, dtype=np.int64),
        },
        "optimizer": {},
        "rng": {"state": np.array([1, 2, 3, 4], dtype=np.int64)},
        "empty_group": {},
        "ünïcödé 组": {"权重/β": np.ones((2, 2), dtype=np.float64), "🙂": np.array([1.0])},
    }
    meta = {
        "nnjit_version": "0.1.0", "model_class": "nnjit.nn.MLP", "epoch": 12,
        "optimizer": {"name": "Adam", "lr": 1e-3, "betas": [0.9, 0.999], "amsgrad": False},
        "big": 2**70, "none": None, "text": "naïve ✓", "nested": {"a": [{"b": []}, {}]},
        "float": -0.0, "tiny": 5e-324,
    }
    path = tmp_path / "model.nne"
    assert save_nne(path, groups, meta) is None
    loaded = load_nne(path)
    assert isinstance(loaded, NNEFile)
    assert loaded.version == 1
    _assert_same(groups, loaded)
    assert loaded.metadata == meta
    assert list(loaded.metadata) == list(meta)
    assert loaded.groups["params"]["scalar_0d"].ndim == 0
    assert loaded.groups["params"]["scalar_1"].shape == (1,)
    # str path and PathLike both accepted
    _assert_same(groups, load_nne(str(path)))


def test_empty_file_contents(tmp_path):
    path = tmp_path / "empty.nne"
    save_nne(path, {})
    loaded = load_nne(path)
    assert loaded.groups == {} and loaded.metadata == {} and loaded.version == 1
    assert path.stat().st_size % 64 == 0


def test_nan_payloads_are_bit_exact(tmp_path):
    f32 = np.array([0x7FC00000, 0x7FC00001, 0xFFC12345, 0x7F800001, 0x7FA00000, 0x80000000,
                    0x7F800000, 0xFF800000], dtype=np.uint32).view(np.float32)
    f64 = np.array([0x7FF8000000000001, 0xFFF0000000000001, 0x7FF4000000000000,
                    0x8000000000000000, 0x7FF0000000000000], dtype=np.uint64).view(np.float64)
    groups = {"params": {"f32": f32, "f64": f64}}
    path = tmp_path / "nan.nne"
    save_nne(path, groups)
    _assert_same(groups, load_nne(path))


def test_non_contiguous_and_big_endian_inputs(tmp_path):
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    big = np.array([1.5, np.nan, -3.0], dtype=">f4")
    big_i = np.array([[1, -2], [3, 2**40]], dtype=">i8")
    groups = {"g": {"t": base.T, "strided": base[::2, 1::3], "big": big, "big_i": big_i}}
    path = tmp_path / "nc.nne"
    save_nne(path, groups)
    loaded = load_nne(path)
    _assert_same(groups, loaded)
    np.testing.assert_array_equal(loaded.groups["g"]["t"], base.T)
    np.testing.assert_array_equal(loaded.groups["g"]["big_i"], big_i)
    assert loaded.groups["g"]["big"].dtype == np.dtype("<f4")


def test_loaded_arrays_are_usable(tmp_path):
    path = tmp_path / "u.nne"
    save_nne(path, SAMPLE_GROUPS)
    loaded = load_nne(path)
    for tensors in loaded.groups.values():
        for a in tensors.values():
            assert a.flags.c_contiguous and a.flags.aligned and a.flags.writeable
            assert a.dtype.isnative
            a[...] = 0  # writable, and independent of each other:
    assert all(not np.any(a) for t in loaded.groups.values() for a in t.values())
    # the file on disk is not affected
    _assert_same(SAMPLE_GROUPS, load_nne(path))


def test_metadata_tuples_come_back_as_lists(tmp_path):
    path = tmp_path / "t.nne"
    save_nne(path, {}, {"shape": (3, 4), "mapping": {"x": (1,)}})
    assert load_nne(path).metadata == {"shape": [3, 4], "mapping": {"x": [1]}}


@st.composite
def _any_array(draw):
    dtype = draw(st.sampled_from(["<f4", "<f8", "<i8", ">f8", "<i4", "u1"]))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5))
    n = int(np.prod(shape))
    raw = draw(st.binary(min_size=n * np.dtype(dtype).itemsize,
                         max_size=n * np.dtype(dtype).itemsize))
    return np.frombuffer(raw, dtype=dtype).reshape(shape)  # arbitrary bits: NaNs of every kind


_names = st.text(min_size=1, max_size=12)  # excludes lone surrogates by default


@given(groups=st.dictionaries(_names, st.dictionaries(_names, _any_array(), max_size=4),
                              max_size=3))
def test_round_trip_property(scratch, groups):
    save_nne(scratch, groups, {"n": len(groups)})
    loaded = load_nne(scratch)
    _assert_same(groups, loaded)
    assert loaded.metadata == {"n": len(groups)}


# --------------------------------------------------------------------------------------------
# invalid input to save_nne: rejected before the disk is touched
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("groups", "metadata", "exc", "fragment"),
    [
        ({"params": {"": np.zeros(1)}}, None, ValueError, "non-empty"),
        ({"params": {3: np.zeros(1)}}, None, ValueError, "non-empty"),
        ({"": {"w": np.zeros(1)}}, None, ValueError, "non-empty"),
        ({"params": {"w\ud800": np.zeros(1)}}, None, ValueError, "UTF-8"),
        ({"params": {"w": np.zeros(1, dtype=np.float16)}}, None, TypeError, "float16"),
        ({"params": {"w": np.zeros(1, dtype=bool)}}, None, TypeError, "bool"),
        ({"params": {"w": np.zeros(1, dtype=object)}}, None, TypeError, "object"),
        ({"params": {"w": np.zeros(1, dtype=np.complex64)}}, None, TypeError, "complex"),
        ({"params": {"w": [1.0, 2.0]}}, None, TypeError, "ndarray"),
        ({"params": [np.zeros(1)]}, None, TypeError, "mapping"),
        ({}, {"loss": float("nan")}, ValueError, "NaN"),
        ({}, {"hist": [1.0, float("inf")]}, ValueError, "['hist'][1]"),
        ({}, {1: "int key"}, TypeError, "non-string key"),
        ({}, {"x": object()}, TypeError, "['x']"),
        ({}, {"x": np.float32(1.0)}, TypeError, "numpy.float32"),
        ({}, {"x": {1, 2}}, TypeError, "set"),
        ({}, ["not", "a", "dict"], TypeError, "metadata must be a dict"),
    ],
)
def test_save_rejects_invalid_input(tmp_path, groups, metadata, exc, fragment):
    path = tmp_path / "bad.nne"
    with pytest.raises(exc) as info:
        save_nne(path, groups, metadata)
    assert fragment in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_save_rejects_circular_metadata(tmp_path):
    meta: dict = {}
    meta["self"] = meta
    with pytest.raises(ValueError):
        save_nne(tmp_path / "c.nne", {}, meta)
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------------
# atomic writes
# --------------------------------------------------------------------------------------------


@pytest.fixture
def existing(tmp_path) -> tuple[Path, bytes]:
    path = tmp_path / "ckpt.nne"
    save_nne(path, SAMPLE_GROUPS, {"epoch": 1})
    return path, path.read_bytes()


def _assert_untouched(path: Path, old: bytes) -> None:
    assert path.read_bytes() == old
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temp file left
    assert load_nne(path).metadata == {"epoch": 1}


NEW_GROUPS = {"params": {"w": np.full((100, 100), 2.0)}}


def test_atomic_replace_failure_keeps_old_file(existing, monkeypatch):
    path, old = existing

    def boom(src, dst):
        assert Path(src).exists() and Path(src).parent == path.parent  # temp is a sibling
        raise OSError("simulated rename failure")

    monkeypatch.setattr(nne.os, "replace", boom)
    with pytest.raises(OSError, match="simulated"):
        save_nne(path, NEW_GROUPS, {"epoch": 2})
    monkeypatch.undo()
    _assert_untouched(path, old)


@pytest.mark.parametrize("error", [OSError("disk full"), KeyboardInterrupt()])
def test_atomic_failure_mid_write_keeps_old_file(existing, monkeypatch, error):
    path, old = existing

    def boom(fd):
        raise error

    monkeypatch.setattr(nne.os, "fsync", boom)
    with pytest.raises(type(error)):
        save_nne(path, NEW_GROUPS, {"epoch": 2})
    monkeypatch.undo()
    _assert_untouched(path, old)


def test_atomic_failure_while_writing_payload(existing, monkeypatch):
    path, old = existing
    calls = []
    real = nne.hashlib.sha256

    class Exploding:
        def __init__(self, data):
            self._h = real(data)

        def update(self, data):
            calls.append(len(data))
            if len(calls) == 3:
                raise MemoryError("simulated failure half way through the payload")
            self._h.update(data)

        def digest(self):
            return self._h.digest()

    monkeypatch.setattr(nne.hashlib, "sha256", Exploding)
    with pytest.raises(MemoryError):
        save_nne(path, {"p": {"a": np.ones(10), "b": np.ones(10), "c": np.ones(10)}}, {})
    monkeypatch.undo()
    _assert_untouched(path, old)


def test_atomic_bad_metadata_keeps_old_file(existing):
    path, old = existing
    with pytest.raises(TypeError):
        save_nne(path, NEW_GROUPS, {"epoch": 2, "callback": lambda: None})
    _assert_untouched(path, old)


def test_overwrite_replaces_and_keeps_mode(existing):
    path, _ = existing
    if os.name == "posix":
        path.chmod(0o640)
    save_nne(path, NEW_GROUPS, {"epoch": 2})
    loaded = load_nne(path)
    _assert_same(NEW_GROUPS, loaded)
    assert loaded.metadata == {"epoch": 2}
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    if os.name == "posix":
        assert path.stat().st_mode & 0o777 == 0o640


def test_new_file_is_not_private(tmp_path):
    if os.name != "posix":
        pytest.skip("POSIX permissions")
    umask = os.umask(0o022)
    os.umask(umask)
    path = tmp_path / "new.nne"
    save_nne(path, {})
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # like open(), not mkstemp's 0o600


def test_missing_directory_and_missing_file_are_os_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        save_nne(tmp_path / "nope" / "x.nne", {})
    with pytest.raises(FileNotFoundError):
        load_nne(tmp_path / "absent.nne")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------------
# corruption of a written file
# --------------------------------------------------------------------------------------------


def test_layout_matches_the_documentation(sample):
    _, data = sample
    magic, version, reserved, hl, pl, digest = struct.unpack_from("<8sIIQQ32s", data)
    assert (magic, version, reserved) == (MAGIC, 1, 0)
    assert len(data) == 64 + hl + pl and hl % 64 == 0 and pl % 64 == 0
    assert digest == hashlib.sha256(data[:32] + data[64:]).digest()
    header = json.loads(data[64 : 64 + hl].decode("utf-8"))
    assert header["groups"] == ["params", "optimizer"]
    assert header["metadata"] == SAMPLE_META
    payload = data[64 + hl :]
    for rec in header["tensors"]:
        assert rec["offset"] % 64 == 0
        a = SAMPLE_GROUPS[rec["group"]][rec["name"]]
        assert rec["dtype"] == a.dtype.newbyteorder("<").str and rec["shape"] == list(a.shape)
        assert payload[rec["offset"] : rec["offset"] + rec["nbytes"]] == _bits(a)


def test_worked_example_from_the_docs(tmp_path):
    path = tmp_path / "example.nne"
    save_nne(path, {"params": {"w": np.array([1.0, 2.0], dtype=np.float32)}}, {"epoch": 3})
    data = path.read_bytes()
    header = (b'{"groups":["params"],"tensors":[{"name":"w","group":"params","dtype":"<f4",'
              b'"shape":[2],"offset":0,"nbytes":8}],"metadata":{"epoch":3}}')
    assert len(header) == 134
    expected = (MAGIC + bytes.fromhex("01000000 00000000 c000000000000000 4000000000000000")
                + bytes.fromhex("61099944dd977d915568be2a4c26ae3bc58a3ed44a4f51037662c2e1d0bbc3c9")
                + header + b" " * 58 + bytes.fromhex("0000803f00000040") + b"\0" * 56)
    assert data == expected


@settings(max_examples=150)
@given(cut=st.integers(min_value=0, max_value=10**9))
def test_truncated_anywhere_is_rejected(sample, scratch, cut):
    _, data = sample
    cut %= len(data)
    scratch.write_bytes(data[:cut])
    _expect_error(scratch, "truncated")


@pytest.mark.parametrize("cut", [0, 1, 7, 8, 12, 32, 63, 64, 65, -64, -1])
def test_truncated_fixed_points(sample, tmp_path, cut):
    _, data = sample
    path = tmp_path / "cut.nne"
    path.write_bytes(data[:cut])
    err = _expect_error(path, "truncated")
    if cut < 0:
        assert f"expected {len(data)} bytes, got {len(data) + cut}" in str(err)


@settings(max_examples=200)
@given(pos=st.integers(min_value=0, max_value=10**9), mask=st.integers(min_value=1, max_value=255))
def test_any_flipped_byte_is_detected(sample, scratch, pos, mask):
    _, data = sample
    pos %= len(data)
    bad = bytearray(data)
    bad[pos] ^= mask
    scratch.write_bytes(bytes(bad))
    _expect_error(scratch)


def test_flipped_byte_in_each_region(sample, tmp_path):
    _, data = sample
    hl = struct.unpack_from("<Q", data, 16)[0]
    cases = {0: "not an nnjit .nne file", 8: "unsupported format version",
             12: "reserved", 40: "corrupt", 64 + 3: "corrupt", 64 + hl + 5: "corrupt",
             len(data) - 1: "corrupt"}
    for pos, fragment in cases.items():
        bad = bytearray(data)
        bad[pos] ^= 0x01
        path = tmp_path / f"flip{pos}.nne"
        path.write_bytes(bytes(bad))
        _expect_error(path, fragment)


def test_trailing_data_is_rejected(sample, tmp_path):
    _, data = sample
    path = tmp_path / "trailing.nne"
    path.write_bytes(data + b"\0")
    _expect_error(path, "trailing")


@pytest.mark.parametrize(
    "content",
    [b"PK\x03\x04" + b"\0" * 100, b"\x80\x04\x95" + b"\0" * 100,  # zip / pickle
     b"hello world, not a checkpoint" * 4, b"\x89NNE\r\n\x1a\r" + b"\0" * 56, b"x"],
)
def test_wrong_magic(tmp_path, content):
    path = tmp_path / "other.nne"
    path.write_bytes(content)
    _expect_error(path, "not an nnjit .nne file")


@pytest.mark.parametrize("version", [0, 2, 99, 2**32 - 1])
def test_unsupported_version(tmp_path, version):
    path = tmp_path / "v.nne"
    path.write_bytes(_craft(_header(), version=version))
    err = _expect_error(path, f"unsupported format version {version}")
    assert ("newer" in str(err)) == (version > 1)


@pytest.mark.parametrize(
    ("header_len", "payload_len", "fragment"),
    [
        (10**15, 0, "truncated: expected"),
        (0, 10**15, "truncated: expected"),
        (2**64 - 64, 2**64 - 64, "truncated: expected"),
        (64, 2**63, "truncated: expected"),
        (65, 0, "multiples of 64"),
        (0, 0, "trailing"),
    ],
)
def test_absurd_lengths_rejected_without_allocating(tmp_path, header_len, payload_len, fragment):
    path = tmp_path / "absurd.nne"
    path.write_bytes(_craft(_header(), header_len=header_len, payload_len=payload_len))
    tracemalloc.start()
    try:
        _expect_error(path, fragment)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_reserved_field_must_be_zero(tmp_path):
    path = tmp_path / "r.nne"
    path.write_bytes(_craft(_header(), reserved=1))
    _expect_error(path, "reserved")


# --------------------------------------------------------------------------------------------
# structurally invalid headers behind a *valid* checksum (a buggy or hostile writer)
# --------------------------------------------------------------------------------------------


def test_crafted_valid_file_loads(tmp_path):
    """A file built by hand from the documentation is read back (the doc is the spec)."""
    w = np.array([1.0, -2.0, np.nan], dtype="<f4")
    step = np.array(5, dtype="<i8")
    payload = w.tobytes() + b"\0" * (64 - 12) + step.tobytes()
    header = _header(_record("w", shape=(3,)), _record("step", "opt", "<i8", (), 64),
                     groups=("params", "opt", "empty"), metadata={"epoch": 3})
    path = tmp_path / "hand.nne"
    path.write_bytes(_craft(header, payload))
    loaded = load_nne(path)
    _assert_same({"params": {"w": w}, "opt": {"step": step}, "empty": {}}, loaded)
    assert loaded.metadata == {"epoch": 3}


PAYLOAD_128 = bytes(range(128))


@pytest.mark.parametrize(
    ("header", "fragment"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe{}", "not valid JSON"),
        (b'{"groups":[],"tensors":[],"metadata":{"x":NaN}}', "not valid JSON"),
        (b'{"groups":[],"tensors":[],"metadata":{},"metadata":{}}', "duplicate key"),
        (b"[1, 2, 3]", "not a JSON object"),
        (b"[" * 100000 + b"]" * 100000, "JSON"),
        ({"groups": [], "tensors": []}, "header keys"),
        ({"groups": [], "tensors": [], "metadata": {}, "extra": 1}, "header keys"),
        ({"groups": [], "tensors": [], "metadata": []}, "'metadata' is not a JSON object"),
        ({"groups": {}, "tensors": [], "metadata": {}}, "JSON arrays"),
        (_header(groups=("params", "params")), "listed twice"),
        (_header(groups=("",)), "non-empty string"),
        (_header(groups=(3,)), "non-empty string"),
        (_header("not a record"), "not a JSON object"),
        (_header({"name": "w"}), "has keys"),
        (_header(_record(name="")), "non-empty string"),
        (_header(_record(name=7)), "non-empty string"),
        (_header(_record(group="other")), "not listed"),
        (_header(_record(), _record()), "duplicate name"),
        (_header(_record(dtype=">f4")), "dtype '>f4' not allowed"),
        (_header(_record(dtype="<f2", nbytes=4)), "not allowed"),
        (_header(_record(dtype="|O", nbytes=16)), "not allowed"),
        (_header(_record(dtype="|b1", nbytes=2)), "not allowed"),
        (_header(_record(dtype=["<f4"], nbytes=8)), "not allowed"),
        (_header(_record(shape=(-2,), nbytes=8)), "shape"),
        (_header(_record(shape=(True,), nbytes=4)), "shape"),
        (_header(_record(shape=(1.0,), nbytes=4)), "shape"),
        (_header({**_record(), "shape": "2"}), "shape"),
        (_header(_record(shape=(1,) * 33)), "shape"),
        (_header(_record(offset=-64)), "non-negative"),
        (_header(_record(offset=1.5)), "non-negative"),
        (_header(_record(nbytes=-8)), "non-negative"),
        (_header(_record(offset=True)), "non-negative"),
        (_header(_record(nbytes=4)), "does not match shape"),
        (_header(_record(offset=8)), "aligned"),
        (_header(_record(offset=128)), "out of bounds"),
        (_header(_record(shape=(33,))), "out of bounds"),
        (_header(_record(shape=(10**15,), dtype="<f8")), "out of bounds"),
        (_header(_record(shape=(10**15, 10**15, 10**15))), "too large"),
        (_header(_record(shape=(0, 2**40, 2**40), nbytes=0)), "too large"),
        (_header(_record(shape=(0, 10**30), nbytes=0)), "too large"),
        (_header(_record(shape=(10,)), _record("v", shape=(2,), offset=0)), "overlap"),
        (_header(_record(shape=(20,)), _record("v", shape=(4,), offset=64)), "overlap"),
        (_header(_record(shape=(2,), offset=64), _record("v", shape=(17,), offset=0)), "overlap"),
    ],
)
def test_structurally_invalid_header(tmp_path, header, fragment):
    path = tmp_path / "crafted.nne"
    path.write_bytes(_craft(header, PAYLOAD_128))
    _expect_error(path, fragment)


def test_zero_size_tensors_may_share_offsets(tmp_path):
    header = _header(_record("a", shape=(0, 3)), _record("b", shape=(0,), offset=0),
                     _record("c", shape=(2,), offset=0), _record("d", shape=(0,), offset=128))
    path = tmp_path / "zeros.nne"
    path.write_bytes(_craft(header, PAYLOAD_128))
    loaded = load_nne(path).groups["params"]
    assert loaded["a"].shape == (0, 3) and loaded["d"].shape == (0,)
    assert loaded["c"].tobytes() == PAYLOAD_128[:8]


_MUTATIONS = {
    "name": st.sampled_from(["", 5, None, "w"]),
    "group": st.sampled_from(["missing", "", 3]),
    "dtype": st.sampled_from([">f4", "<f2", "|b1", "<c8", "f4", 4]),
    "shape": st.one_of(st.lists(st.integers(-3, 2**70), max_size=4),
                       st.lists(st.booleans(), max_size=3), st.just("2")),
    "offset": st.one_of(st.integers(-(2**70), 2**70), st.sampled_from([1, 32, 320, True, 1.0])),
    "nbytes": st.one_of(st.integers(-(2**70), 2**70), st.sampled_from([1, 7, True, 64.0])),
}


@st.composite
def _hostile_record(draw):
    """A plausible record (so deep checks such as overlap are reached), sometimes mutated."""
    dtype = draw(st.sampled_from(nne.ALLOWED_DTYPES))
    shape = draw(st.lists(st.integers(0, 5), max_size=3))
    rec = {
        "name": draw(st.sampled_from(["w", "b", "m", "v", "ü"])),
        "group": draw(st.sampled_from(["params", "opt"])),
        "dtype": dtype,
        "shape": shape,
        "offset": draw(st.sampled_from([0, 64, 128, 192])),
        "nbytes": int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize,
    }
    for key in draw(st.lists(st.sampled_from(sorted(_MUTATIONS)), max_size=2, unique=True)):
        rec[key] = draw(_MUTATIONS[key])
    return rec


@settings(max_examples=150)
@given(records=st.lists(_hostile_record(), max_size=4),
       payload_len=st.sampled_from([0, 64, 128, 256]))
def test_hostile_headers_never_crash(scratch, records, payload_len):
    header = _header(*records, groups=("params", "opt"))
    scratch.write_bytes(_craft(header, (PAYLOAD_128 * 2)[:payload_len]))
    try:
        loaded = load_nne(scratch)
    except NNEFormatError as exc:
        assert str(scratch) in str(exc)
        return
    # accepted: what it returns is exactly what the records describe, read from the payload
    payload = (PAYLOAD_128 * 2)[:payload_len]
    by_key = {(r["group"], r["name"]): r for r in records}
    assert len(by_key) == len(records)
    assert sum(len(t) for t in loaded.groups.values()) == len(records)
    for g, tensors in loaded.groups.items():
        for name, a in tensors.items():
            r = by_key[(g, name)]
            assert a.dtype == np.dtype(r["dtype"]) and list(a.shape) == r["shape"]
            assert a.tobytes() == payload[r["offset"] : r["offset"] + r["nbytes"]]


@settings(max_examples=100)
@given(content=st.binary(max_size=300), with_magic=st.booleans())
def test_random_bytes_never_crash(scratch, content, with_magic):
    scratch.write_bytes(MAGIC + content if with_magic else content)
    _expect_error(scratch)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                  max_size=3),
    max_leaves=8,
)


@settings(max_examples=100)
@given(record=st.fixed_dictionaries({k: _json for k in
                                     ("name", "group", "dtype", "shape", "offset", "nbytes")}),
       other=_json, where=st.sampled_from(["record", "top", "groups", "tensors", "metadata"]))
def test_arbitrary_json_headers_never_crash(scratch, record, other, where):
    header = _header(record)
    if where == "top":
        header = other
    elif where != "record":
        header[where] = other
    scratch.write_bytes(_craft(header, PAYLOAD_128))
    try:
        load_nne(scratch)
    except NNEFormatError as exc:
        assert str(scratch) in str(exc)


# --------------------------------------------------------------------------------------------
# check_state
# --------------------------------------------------------------------------------------------


def test_check_state_accepts_matching_state():
    check_state({"w": (2, 3), "b": (3,), "s": ()},
                {"b": np.zeros(3), "w": np.zeros((2, 3)), "s": np.array(1.0)}, where="x.nne")


def test_check_state_reports_everything_at_once():
    expected = {"fc1.w": (4, 16), "fc1.b": (16,), "fc2.w": (16, 3), "fc2.b": (3,), "s": (1,)}
    loaded = {"fc1.w": np.zeros((16, 4)), "fc2.w": np.zeros((16, 3)), "fc2.b": np.zeros(4),
              "extra.a": np.zeros(1), "extra.b": np.zeros(2), "s": np.array(1.0)}
    with pytest.raises(StateMismatchError) as info:
        check_state(expected, loaded, where="/runs/abc/checkpoints/LAST.nne")
    err = info.value
    msg = str(err)
    assert isinstance(err, ValueError)
    assert "/runs/abc/checkpoints/LAST.nne" in msg
    assert err.missing == ["fc1.b"]
    assert err.unexpected == ["extra.a", "extra.b"]
    assert err.mismatched == [("fc1.w", (4, 16), (16, 4)), ("fc2.b", (3,), (4,)), ("s", (1,), ())]
    for fragment in ["1 missing key", "2 unexpected keys", "3 shape mismatches", "'fc1.b'",
                     "'extra.a'", "'extra.b'", "'fc1.w': expected (4, 16), got (16, 4)",
                     "'fc2.b': expected (3,), got (4,)", "'s': expected (1,), got ()"]:
        assert fragment in msg, msg
    assert "fc2.w" not in msg


@pytest.mark.parametrize(
    ("expected", "loaded", "fragment"),
    [
        ({"a": (1,)}, {}, "missing keys: 'a'"),
        ({}, {"a": np.zeros(1)}, "unexpected keys: 'a'"),
        ({"a": (2, 2)}, {"a": np.zeros(4)}, "'a': expected (2, 2), got (4,)"),
    ],
)
def test_check_state_single_problem(expected, loaded, fragment):
    with pytest.raises(StateMismatchError, match="where.nne") as info:
        check_state(expected, loaded, where="where.nne")
    assert fragment in str(info.value)


def test_check_state_with_loaded_file(tmp_path):
    path = tmp_path / "m.nne"
    save_nne(path, SAMPLE_GROUPS)
    params = load_nne(path).groups["params"]
    check_state({k: v.shape for k, v in SAMPLE_GROUPS["params"].items()}, params, where=str(path))
    with pytest.raises(StateMismatchError, match="m.nne"):
        check_state({"fc1.weight": (4, 3)}, params, where=str(path))


# --------------------------------------------------------------------------------------------
# the exceptions themselves
# --------------------------------------------------------------------------------------------


def test_exceptions_construct_and_copy():
    err = NNEFormatError("/a/b.nne", "file is corrupt")
    assert str(err) == "/a/b.nne: file is corrupt" and err.path == "/a/b.nne"
    assert err.reason == "file is corrupt"
    ready = NNEFormatError("/a/b.nne: no 'params' group")  # a ready-made message also works
    assert str(ready) == "/a/b.nne: no 'params' group" and ready.path is None
    assert isinstance(err, ValueError) and isinstance(ready, ValueError)
    mismatch = StateMismatchError("x.nne", ["a"], ["b"], [("c", (1,), (2,))])
    for e in (err, ready, mismatch):  # deepcopy goes through __reduce__, like multiprocessing
        clone = copy.deepcopy(e)
        assert type(clone) is type(e) and str(clone) == str(e)
    assert copy.deepcopy(mismatch).mismatched == [("c", (1,), (2,))]
