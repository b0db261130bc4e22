"""Reading an IDX file (the MNIST / Fashion-MNIST format), raw or gzip-compressed: :func:`read_idx`.

The file is untrusted: the magic number, the number of dimensions and every dimension are checked
before any data is read, the data length is checked against the file size (for a ``.gz`` file,
against the most a gzip stream of that size can expand to) and exactly that many bytes are read;
a short or over-long file is an error naming the file.
"""

from __future__ import annotations

import gzip
import math
import os
import zlib

import numpy as np

#: IDX element types the loaders accept: type code -> big-endian NumPy dtype.
IDX_TYPES = {0x08: np.dtype(">u1"), 0x09: np.dtype(">i1"), 0x0B: np.dtype(">i2"),
             0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}

#: deflate expands at most ~1032:1, so a .gz of ``s`` bytes holds at most this many times ``s``.
_GZIP_MAX_RATIO = 1100

#: An IDX file has at most this many dimensions (MNIST uses 1 and 3).
_MAX_NDIM = 8


class IdxFormatError(ValueError):
    """An IDX file that cannot be read; the message names the file."""


def read_idx(path, max_ndim: int = _MAX_NDIM) -> np.ndarray:
    """The array stored in the IDX file ``path`` (``.gz`` files are decompressed).

    Returns a native-endian array of the stored type and shape.

    Raises:
        FileNotFoundError: no such file. IdxFormatError (a ValueError): bad magic number, type
            code or dimensions, or a data length that does not match the header.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such IDX file: {path}")
    size = os.path.getsize(path)
    compressed = path.endswith(".gz")
    opener = gzip.open if compressed else open
    try:
        with opener(path, "rb") as f:
            head = _read_exactly(f, 4, path, "the 4-byte magic number")
            if head[0] != 0 or head[1] != 0:
                raise IdxFormatError(f"{path} is not an IDX file (magic number "
                                     f"{head.hex()} does not start with 0000)")
            code, ndim = head[2], head[3]
            if code not in IDX_TYPES:
                raise IdxFormatError(f"{path}: unknown IDX element type 0x{code:02x} (valid: "
                                     f"{', '.join(f'0x{c:02x}' for c in IDX_TYPES)})")
            if not 1 <= ndim <= max_ndim:
                raise IdxFormatError(f"{path}: {ndim} dimensions in the header, expected 1 to "
                                     f"{max_ndim}")
            dims = np.frombuffer(_read_exactly(f, 4 * ndim, path, f"{ndim} dimensions"),
                                 dtype=">u4").astype(np.int64)
            dtype = IDX_TYPES[code]
            n_bytes = math.prod(int(d) for d in dims) * dtype.itemsize
            limit = size * _GZIP_MAX_RATIO if compressed else size - 4 - 4 * ndim
            if n_bytes > limit:
                shape = "x".join(str(int(d)) for d in dims)
                raise IdxFormatError(
                    f"{path}: the header says {shape} values of {dtype.itemsize} byte(s) "
                    f"({n_bytes} bytes) but the file "
                    + (f"({size} bytes compressed) cannot hold that many" if compressed
                       else f"holds only {max(limit, 0)} bytes of data"))
            data = _read_exactly(f, n_bytes, path, f"{n_bytes} bytes of data")
            if f.read(1):
                raise IdxFormatError(f"{path}: data continues past the {n_bytes} bytes the "
                                     "header describes")
    except (OSError, EOFError, zlib.error) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise IdxFormatError(f"{path}: cannot read ({type(e).__name__}: {e})") from None
    array = np.frombuffer(data, dtype=dtype).reshape(tuple(int(d) for d in dims))
    return array.astype(dtype.newbyteorder("="))


def _read_exactly(f, n: int, path: str, what: str) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise IdxFormatError(f"{path} is truncated: expected {what}, got {len(data)} of {n} "
                             "bytes")
    return data
