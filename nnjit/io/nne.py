"""The ``.nne`` weights/checkpoint file format: named tensor groups + JSON metadata, no pickle.

Layout (all integers little-endian; full byte-by-byte description in ``docs/nne-format.md``)::

    offset  size  field
    0       8     magic  b"\\x89NNE\\r\\n\\x1a\\n"
    8       4     format version, uint32 (this module writes and reads 1)
    12      4     reserved, uint32, must be 0
    16      8     header length H, uint64 (a multiple of 64)
    24      8     payload length P, uint64 (a multiple of 64)
    32      32    SHA-256 of bytes [0, 32) + header + payload
    64      H     header: UTF-8 JSON, padded with spaces
    64+H    P     payload: raw little-endian tensor bytes, each tensor at a 64-byte aligned offset

The file is exactly ``64 + H + P`` bytes. Writing is atomic (temp file in the same directory,
fsync, ``os.replace``, fsync of the directory). Reading checks every length against the real file
size before allocating anything, verifies the checksum before parsing the header, then validates
every tensor record (dtype, shape, bounds, alignment, overlap) — a bad file raises
:class:`NNEFormatError` naming the path, never a crash and never garbage.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nnjit.checks import is_int
from nnjit.io.atomic import atomic_replace

__all__ = [
    "ALIGNMENT",
    "ALLOWED_DTYPES",
    "FORMAT_VERSION",
    "MAGIC",
    "PREAMBLE_SIZE",
    "NNEFile",
    "NNEFormatError",
    "StateMismatchError",
    "check_state",
    "load_nne",
    "save_nne",
]

MAGIC = b"\x89NNE\r\n\x1a\n"
FORMAT_VERSION = 1
SUPPORTED_VERSIONS = (1,)
ALIGNMENT = 64
PREAMBLE_SIZE = 64
# magic, version, reserved, header length, payload length, sha256 digest
_PREAMBLE = struct.Struct("<8sIIQQ32s")
assert _PREAMBLE.size == PREAMBLE_SIZE
_HASHED_PREFIX = 32  # bytes [0, 32) of the preamble are covered by the digest

#: dtype strings allowed in a tensor record (``np.dtype(...).str`` of the little-endian form).
ALLOWED_DTYPES = ("<f4", "<f8", "<i4", "<i8", "|u1")
_MAX_NDIM = 32
_MAX_INTP = int(np.iinfo(np.intp).max)
_HEADER_KEYS = frozenset({"groups", "tensors", "metadata"})
_RECORD_KEYS = frozenset({"name", "group", "dtype", "shape", "offset", "nbytes"})
_CHUNK = 1 << 24  # read the payload in 16 MiB pieces


class NNEFormatError(ValueError):
    """A file is not a valid ``.nne`` file.

    ``NNEFormatError(path, reason)`` gives the message ``"<path>: <reason>"`` and sets ``path`` and
    ``reason``; ``NNEFormatError(message)`` takes a ready message (``path`` is then ``None``).
    """

    def __init__(self, path_or_message: str | os.PathLike[str], reason: str | None = None) -> None:
        if reason is None:
            self.path: str | None = None
            self.reason = str(path_or_message)
            super().__init__(self.reason)
        else:
            self.path = os.fspath(path_or_message)
            self.reason = reason
            super().__init__(f"{self.path}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        args = (self.reason,) if self.path is None else (self.path, self.reason)
        return (type(self), args)


class StateMismatchError(ValueError):
    """Loaded tensors do not match the expected names/shapes (every problem listed at once)."""

    def __init__(
        self,
        where: str,
        missing: list[str],
        unexpected: list[str],
        mismatched: list[tuple[str, tuple[int, ...], tuple[int, ...]]],
    ) -> None:
        self.where = where
        self.missing = missing
        self.unexpected = unexpected
        self.mismatched = mismatched
        counts = []
        if missing:
            counts.append(_plural(len(missing), "missing key"))
        if unexpected:
            counts.append(_plural(len(unexpected), "unexpected key"))
        if mismatched:
            counts.append(_plural(len(mismatched), "shape mismatch", "shape mismatches"))
        lines = [f"state does not match {where}: {', '.join(counts)}"]
        if missing:
            lines.append("  missing keys: " + ", ".join(repr(k) for k in missing))
        if unexpected:
            lines.append("  unexpected keys: " + ", ".join(repr(k) for k in unexpected))
        if mismatched:
            lines.append("  shape mismatches:")
            lines.extend(
                f"    {name!r}: expected {exp}, got {got}" for name, exp, got in mismatched
            )
        super().__init__("\n".join(lines))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.where, self.missing, self.unexpected, self.mismatched))


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


@dataclass(frozen=True)
class NNEFile:
    """The contents of a ``.nne`` file.

    ``groups`` maps group name -> tensor name -> array, in file order. The arrays are native-endian,
    C-contiguous, aligned and writable views into one buffer holding the file's payload. ``path``
    is the file it was read from (named in errors about its contents).
    """

    groups: dict[str, dict[str, np.ndarray]]
    metadata: dict[str, Any]
    version: int
    path: str | None = None


# --------------------------------------------------------------------------------------------
# writing
# --------------------------------------------------------------------------------------------


def _align(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


def _check_name(kind: str, name: object, where: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"{kind} names must be non-empty strings, got {name!r}{where}")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{kind} name {name!r}{where} is not encodable as UTF-8") from exc
    return name


def _le_array(arr: object, label: str) -> np.ndarray:
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"tensor {label} must be a numpy.ndarray, got {type(arr).__name__}")
    arr = np.asarray(arr)  # plain ndarray (drops np.matrix / masked-array subclasses)
    le = arr.dtype.newbyteorder("<")
    if le.str not in ALLOWED_DTYPES:
        raise TypeError(
            f"tensor {label} has dtype {arr.dtype}; allowed: float32, float64, int32, int64, "
            "uint8 (convert explicitly)"
        )
    # astype(copy=False) keeps 0-d arrays 0-d (np.ascontiguousarray would not) and byte-swaps
    # without touching the bits (NaN payloads survive).
    return arr.astype(le, order="C", copy=False)


def _check_metadata(value: object, path: str, depth: int = 0) -> None:
    if depth > 64:
        raise ValueError(f"metadata{path}: nested more than 64 levels deep")
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(
                f"metadata{path} is {value!r}; JSON has no NaN/Infinity (store None or a string)"
            )
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"metadata{path} has a non-string key {key!r}")
            _check_metadata(item, f"{path}[{key!r}]", depth + 1)
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_metadata(item, f"{path}[{i}]", depth + 1)
        return
    raise TypeError(
        f"metadata{path} is a {type(value).__module__}.{type(value).__qualname__}, which is not "
        "JSON-serialisable (allowed: dict with str keys, list, tuple, str, int, float, bool, None)"
    )


def save_nne(
    path: str | os.PathLike[str],
    groups: Mapping[str, Mapping[str, np.ndarray]],
    metadata: Mapping[str, Any] | None = None,
) -> None:
    """Write ``groups`` (group name -> tensor name -> array) and ``metadata`` to ``path``.

    Arrays must be float32, float64, int32, int64 or uint8 ndarrays of any shape (0-d included);
    they are stored little-endian and C-contiguous, bit for bit (NaN/Inf are data). Group and tensor
    names are non-empty strings; order is kept; empty groups are kept. ``metadata`` must be strict
    JSON (dict with str keys, list/tuple, str, int, finite float, bool, None; tuples come back as
    lists). Everything is validated before the disk is touched; the write is atomic: on any error
    the temporary file is removed and an existing file at ``path`` is left as it was.
    """
    target = Path(os.fspath(path))
    if not isinstance(groups, Mapping):
        raise TypeError(f"groups must be a mapping of group name -> {{name: array}}, got "
                        f"{type(groups).__name__}")
    meta: dict[str, Any] = {} if metadata is None else metadata  # type: ignore[assignment]
    if not isinstance(meta, dict):
        if isinstance(meta, Mapping):
            meta = dict(meta)
        else:
            raise TypeError(f"metadata must be a dict, got {type(meta).__name__}")
    _check_metadata(meta, "")

    group_names: list[str] = []
    records: list[dict[str, Any]] = []
    arrays: list[np.ndarray] = []
    cursor = 0
    for gname, tensors in groups.items():
        _check_name("group", gname, "")
        if not isinstance(tensors, Mapping):
            raise TypeError(f"group {gname!r} must be a mapping of name -> array, got "
                            f"{type(tensors).__name__}")
        group_names.append(gname)
        for tname, arr in tensors.items():
            _check_name("tensor", tname, f" in group {gname!r}")
            le = _le_array(arr, f"{gname!r}/{tname!r}")
            offset = _align(cursor)
            records.append({
                "name": tname,
                "group": gname,
                "dtype": le.dtype.str,
                "shape": [int(d) for d in le.shape],
                "offset": offset,
                "nbytes": int(le.nbytes),
            })
            arrays.append(le)
            cursor = offset + le.nbytes
    payload_len = _align(cursor)

    header = {"groups": group_names, "tensors": records, "metadata": meta}
    try:
        text = json.dumps(header, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except RecursionError as exc:
        raise ValueError("metadata is nested too deeply to serialise") from exc
    header_bytes = text.encode("utf-8")
    header_len = _align(len(header_bytes))
    header_bytes += b" " * (header_len - len(header_bytes))
    prefix = _PREAMBLE.pack(MAGIC, FORMAT_VERSION, 0, header_len, payload_len, b"\0" * 32)
    prefix = prefix[:_HASHED_PREFIX]

    with atomic_replace(target, "wb") as fh:
        digest = hashlib.sha256(prefix)
        fh.write(prefix + b"\0" * 32)
        fh.write(header_bytes)
        digest.update(header_bytes)
        pos = 0
        for rec, arr in zip(records, arrays):
            pad = rec["offset"] - pos
            if pad:
                fh.write(b"\0" * pad)
                digest.update(b"\0" * pad)
            if arr.nbytes:
                view = memoryview(arr.reshape(-1).view(np.uint8))
                fh.write(view)
                digest.update(view)
            pos = rec["offset"] + rec["nbytes"]
        if payload_len - pos:
            fh.write(b"\0" * (payload_len - pos))
            digest.update(b"\0" * (payload_len - pos))
        fh.seek(_HASHED_PREFIX)
        fh.write(digest.digest())


# --------------------------------------------------------------------------------------------
# reading
# --------------------------------------------------------------------------------------------


def _no_constants(token: str) -> Any:
    raise ValueError(f"non-standard JSON constant {token}")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _read_exact(fh: Any, buf: memoryview) -> int:
    got = 0
    total = len(buf)
    while got < total:
        n = fh.readinto(buf[got : min(total, got + _CHUNK)])
        if not n:
            break
        got += n
    return got


def load_nne(path: str | os.PathLike[str]) -> NNEFile:
    """Read a ``.nne`` file; raise :class:`NNEFormatError` (naming ``path``) if it is not valid.

    OS errors (missing file, permission denied, ...) propagate unchanged.
    """
    spath = os.fspath(path)

    def fail(reason: str) -> NNEFormatError:
        return NNEFormatError(spath, reason)

    from nnjit.io.regular import open_regular

    with open_regular(spath, "rb") as fh:  # (never a FIFO or a device)
        size = os.fstat(fh.fileno()).st_size
        pre = fh.read(PREAMBLE_SIZE)
        if pre[:8] != MAGIC[: len(pre[:8])]:
            raise fail("not an nnjit .nne file (bad magic bytes)")
        if len(pre) < PREAMBLE_SIZE:
            raise fail(f"truncated: expected at least {PREAMBLE_SIZE} bytes, got {len(pre)}")
        magic, version, reserved, header_len, payload_len, stored = _PREAMBLE.unpack(pre)
        if version not in SUPPORTED_VERSIONS:
            newer = " (written by a newer nnjit?)" if version > FORMAT_VERSION else ""
            raise fail(f"unsupported format version {version}{newer}; this nnjit reads "
                       f"version {', '.join(map(str, SUPPORTED_VERSIONS))}")
        if reserved != 0:
            raise fail(f"reserved preamble field is {reserved}, expected 0")
        if header_len % ALIGNMENT or payload_len % ALIGNMENT:
            raise fail(f"header length {header_len} / payload length {payload_len} are not "
                       f"multiples of {ALIGNMENT}")
        expected = PREAMBLE_SIZE + header_len + payload_len
        if size < expected:
            raise fail(f"truncated: expected {expected} bytes, got {size}")
        if size > expected:
            raise fail(f"expected {expected} bytes, got {size} (trailing data)")

        # Every length is now bounded by the real file size: allocating is safe.
        header_bytes = fh.read(header_len)
        payload = np.empty(payload_len, dtype=np.uint8)  # numpy-aligned base for the views
        got = len(header_bytes)
        if got == header_len:
            got += _read_exact(fh, memoryview(payload))
        if got != header_len + payload_len:
            raise fail(f"truncated: expected {expected} bytes, got {PREAMBLE_SIZE + got}")

    digest = hashlib.sha256(pre[:_HASHED_PREFIX])
    digest.update(header_bytes)
    digest.update(memoryview(payload))
    if digest.digest() != stored:
        raise fail("file is corrupt (SHA-256 checksum mismatch)")

    try:
        header = json.loads(
            header_bytes.decode("utf-8"),
            object_pairs_hook=_no_duplicates,
            parse_constant=_no_constants,
        )
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise fail(f"header is not valid JSON: {exc}") from None

    groups, metadata = _parse_header(header, payload, payload_len, fail)
    return NNEFile(groups=groups, metadata=metadata, version=version, path=spath)


def _parse_header(header: Any, payload: np.ndarray, payload_len: int, fail: Any) -> tuple[
    dict[str, dict[str, np.ndarray]], dict[str, Any]
]:
    if not isinstance(header, dict):
        raise fail("header is not a JSON object")
    keys = set(header)
    if keys != _HEADER_KEYS:
        raise fail(f"header keys are {sorted(keys)}, expected {sorted(_HEADER_KEYS)}")
    group_names, records, metadata = header["groups"], header["tensors"], header["metadata"]
    if not isinstance(metadata, dict):
        raise fail("header 'metadata' is not a JSON object")
    if not isinstance(group_names, list) or not isinstance(records, list):
        raise fail("header 'groups' and 'tensors' must be JSON arrays")
    groups: dict[str, dict[str, np.ndarray]] = {}
    for g in group_names:
        if not isinstance(g, str) or not g:
            raise fail(f"group name {g!r} is not a non-empty string")
        if g in groups:
            raise fail(f"group {g!r} is listed twice")
        groups[g] = {}

    spans: list[tuple[int, int, int, str]] = []  # (offset, end, record, name): non-empty only
    parsed: list[tuple[str, str, np.dtype, tuple[int, ...], int, int]] = []
    for i, rec in enumerate(records):
        where = f"tensor record {i}"
        if not isinstance(rec, dict):
            raise fail(f"{where} is not a JSON object")
        if set(rec) != _RECORD_KEYS:
            raise fail(f"{where} has keys {sorted(rec)}, expected {sorted(_RECORD_KEYS)}")
        name, group, dtype_s = rec["name"], rec["group"], rec["dtype"]
        shape, offset, nbytes = rec["shape"], rec["offset"], rec["nbytes"]
        if not isinstance(name, str) or not name:
            raise fail(f"{where}: name {name!r} is not a non-empty string")
        where = f"tensor {name!r} (record {i})"
        if not isinstance(group, str) or group not in groups:
            raise fail(f"{where}: group {group!r} is not listed in 'groups'")
        if name in groups[group]:
            raise fail(f"{where}: duplicate name in group {group!r}")
        if dtype_s not in ALLOWED_DTYPES:
            raise fail(f"{where}: dtype {dtype_s!r} not allowed (allowed: "
                       f"{', '.join(ALLOWED_DTYPES)})")
        if (not isinstance(shape, list) or len(shape) > _MAX_NDIM
                or not all(is_int(d) and d >= 0 for d in shape)):
            raise fail(f"{where}: shape {shape!r} is not a list of at most {_MAX_NDIM} "
                       "non-negative integers")
        if not is_int(offset) or not is_int(nbytes) or offset < 0 or nbytes < 0:
            raise fail(f"{where}: offset {offset!r} / nbytes {nbytes!r} are not non-negative "
                       "integers")
        dtype = np.dtype(dtype_s)
        # numpy refuses shapes whose non-zero extents overflow intp, even when one extent is 0
        if math.prod(d for d in shape if d) * dtype.itemsize > _MAX_INTP:
            raise fail(f"{where}: shape {tuple(shape)} is too large")
        count = math.prod(shape)
        if nbytes != count * dtype.itemsize:
            raise fail(f"{where}: nbytes {nbytes} does not match shape {tuple(shape)} of "
                       f"{dtype_s} ({count * dtype.itemsize} bytes)")
        if offset % ALIGNMENT:
            raise fail(f"{where}: offset {offset} is not {ALIGNMENT}-byte aligned")
        if offset + nbytes > payload_len:
            raise fail(f"{where}: bytes [{offset}, {offset + nbytes}) are out of bounds of the "
                       f"{payload_len}-byte payload")
        groups[group][name] = None  # type: ignore[assignment]  # placeholder: marks the name
        if nbytes:
            spans.append((offset, offset + nbytes, i, name))
        parsed.append((group, name, dtype, tuple(shape), offset, nbytes))

    spans.sort()
    for (start_a, end_a, ia, na), (start_b, end_b, ib, nb) in zip(spans, spans[1:]):
        if start_b < end_a:
            raise fail(f"tensors {na!r} (record {ia}, bytes [{start_a}, {end_a})) and {nb!r} "
                       f"(record {ib}, bytes [{start_b}, {end_b})) overlap in the payload")

    for group, name, dtype, shape, offset, nbytes in parsed:
        if nbytes:
            arr = payload[offset : offset + nbytes].view(dtype).reshape(shape)
        else:
            arr = np.zeros(shape, dtype=dtype)
        if not arr.dtype.isnative:
            arr = arr.astype(arr.dtype.newbyteorder("="))
        groups[group][name] = arr
    return groups, metadata


# --------------------------------------------------------------------------------------------
# comparing a loaded state with what a model expects
# --------------------------------------------------------------------------------------------


def check_state(
    expected: Mapping[str, tuple[int, ...]],
    loaded: Mapping[str, np.ndarray],
    *,
    where: str,
) -> None:
    """Raise :class:`StateMismatchError` listing every missing key, every unexpected key and every
    shape mismatch between ``expected`` (name -> shape) and ``loaded`` (name -> array, or anything
    with a ``shape``); ``where`` (e.g. the file path) is named in the message."""
    missing = [k for k in expected if k not in loaded]
    unexpected = [k for k in loaded if k not in expected]
    mismatched = []
    for k, shape in expected.items():
        if k in loaded:
            exp = tuple(int(d) for d in shape)
            got = tuple(int(d) for d in np.shape(loaded[k]))
            if exp != got:
                mismatched.append((k, exp, got))
    if missing or unexpected or mismatched:
        raise StateMismatchError(where, missing, unexpected, mismatched)
