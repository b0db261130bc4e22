"""Build the archives in ``nnjit/datasets/data/`` (run from anywhere; nothing is downloaded).

* ``iris.npz`` and ``digits.npz`` are written from scikit-learn's *bundled* loaders
  (``sklearn.datasets.load_iris`` / ``load_digits`` read CSV files shipped inside the
  scikit-learn wheel; they never touch the network).
* ``olivetti_faces.npz`` and ``cora.npz`` are byte-for-byte copies of the archives in the
  shared data folder (``../shared/data`` beside the repository, or ``$NNJIT_SHARED_DATA``, or
  ``--shared-dir``), after their
  sha256 has been checked against the values pinned below (the ones in that folder's README).

The npz files are written with a fixed zip timestamp, fixed member order and fixed
compression level, so re-running the script with the same NumPy/zlib gives byte-identical
files. The per-array checksums printed at the end (sha256 of each array's C-order bytes)
do not depend on the zip container at all; they are the ones listed in
``nnjit/datasets/README.md``.

Usage::

    python tools/make_datasets.py            # (re)write nnjit/datasets/data/*.npz
    python tools/make_datasets.py --check    # rebuild in a temp dir, compare with the repo
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT_DIR = REPO / "nnjit" / "datasets" / "data"
DEFAULT_SHARED = Path(os.environ.get("NNJIT_SHARED_DATA") or REPO.parent / "shared" / "data")

#: sha256 of the shared archives, as listed in the shared data README.
SHARED_SHA256 = {
    "olivetti_faces.npz": "0831bb0a17aa733d2217e7fabb34d06bae5da03a37a04d973eaea0ae9481f7d7",
    "cora.npz": "1d3dcd8ba2b53fc923c20822bbebbe47f0c73cddd00b0f0e6f0aca5dc02a717e",
}

_ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # earliest date a zip header can hold; keeps output stable


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_array(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def save_npz_deterministic(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Like ``np.savez_compressed`` but with fixed timestamps, so the bytes are reproducible."""
    for key, arr in arrays.items():
        if arr.dtype.hasobject:
            raise TypeError(f"{key}: object arrays are not allowed (np.load needs allow_pickle)")
    tmp = path.with_suffix(".npz.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for key, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(key + ".npy", date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue(), compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    tmp.replace(path)


def str_array(names) -> np.ndarray:
    """Plain fixed-width unicode array (dtype ``<U``), never an object array."""
    out = np.array([str(n) for n in names], dtype=str)
    assert out.dtype.kind == "U"
    return out


def build_iris() -> dict[str, np.ndarray]:
    from sklearn.datasets import load_iris

    b = load_iris()
    X = np.asarray(b.data, dtype=np.float32)
    y = np.asarray(b.target, dtype=np.int64)
    assert X.shape == (150, 4) and y.shape == (150,)
    assert np.array_equal(X, np.round(b.data, 1).astype(np.float32))  # one-decimal cm values
    assert np.bincount(y).tolist() == [50, 50, 50]
    return {
        "X": X,
        "y": y,
        "feature_names": str_array(b.feature_names),
        "target_names": str_array(b.target_names),
    }


def build_digits() -> dict[str, np.ndarray]:
    from sklearn.datasets import load_digits

    b = load_digits()
    X = np.asarray(b.data, dtype=np.float32)
    y = np.asarray(b.target, dtype=np.int64)
    assert X.shape == (1797, 64) and y.shape == (1797,)
    # stored values are the integer counts 0..16; float32 holds them exactly
    assert np.array_equal(X, np.round(X)) and X.min() == 0 and X.max() == 16
    assert np.array_equal(X.astype(np.float64), b.data)
    return {
        "X": X,
        "y": y,
        "feature_names": str_array(b.feature_names),
        "target_names": str_array(b.target_names),  # "0".."9"
    }


def copy_shared(name: str, shared_dir: Path, out_dir: Path) -> None:
    src = shared_dir / name
    if not src.is_file():
        raise SystemExit(f"missing {src} (pass --shared-dir)")
    got = sha256_file(src)
    if got != SHARED_SHA256[name]:
        raise SystemExit(f"{src}: sha256 {got} != pinned {SHARED_SHA256[name]}; refusing to copy")
    dst = out_dir / name
    shutil.copyfile(src, dst)
    if sha256_file(dst) != SHARED_SHA256[name]:
        raise SystemExit(f"{dst}: copy does not match its source")


def build_all(out_dir: Path, shared_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    save_npz_deterministic(out_dir / "iris.npz", build_iris())
    save_npz_deterministic(out_dir / "digits.npz", build_digits())
    for name in SHARED_SHA256:
        copy_shared(name, shared_dir, out_dir)


FILES = ("iris.npz", "digits.npz", "olivetti_faces.npz", "cora.npz")


def report(out_dir: Path) -> str:
    lines = ["| file | bytes | sha256 |", "| --- | ---: | --- |"]
    for name in FILES:
        p = out_dir / name
        lines.append(f"| `{name}` | {p.stat().st_size:,} | `{sha256_file(p)}` |")
    lines.append("")
    lines.append("| file | array | shape | dtype | sha256 of C-order bytes |")
    lines.append("| --- | --- | --- | --- | --- |")
    for name in FILES:
        with np.load(out_dir / name, allow_pickle=False) as z:
            for key in z.files:
                a = z[key]
                dt = a.dtype.str.replace("|", "\\|")  # "|b1" would split a markdown cell
                lines.append(f"| `{name}` | `{key}` | {a.shape} | {dt} | `{sha256_array(a)}` |")
    return "\n".join(lines)


def arrays_equal(a_path: Path, b_path: Path) -> bool:
    with np.load(a_path, allow_pickle=False) as a, np.load(b_path, allow_pickle=False) as b:
        if a.files != b.files:
            return False
        return all(a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]) for k in a.files)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared-dir", type=Path, default=DEFAULT_SHARED)
    ap.add_argument("--out-dir", type=Path, default=OUT_DIR)
    ap.add_argument(
        "--check",
        action="store_true",
        help="rebuild into a temporary folder and compare with --out-dir (nothing is written)",
    )
    args = ap.parse_args(argv)

    import sklearn

    print(f"numpy {np.__version__}, scikit-learn {sklearn.__version__}", file=sys.stderr)
    if not args.check:
        build_all(args.out_dir, args.shared_dir)
        print(report(args.out_dir))
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        tmp_dir = Path(tmp)
        build_all(tmp_dir, args.shared_dir)
        ok = True
        for name in FILES:
            a, b = tmp_dir / name, args.out_dir / name
            if not b.is_file():
                print(f"MISSING  {b}")
                ok = False
            elif sha256_file(a) == sha256_file(b):
                print(f"same bytes   {name}")
            elif arrays_equal(a, b):
                print(f"same arrays  {name} (zip bytes differ: other numpy/zlib version)")
            else:
                print(f"DIFFERENT    {name}")
                ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
