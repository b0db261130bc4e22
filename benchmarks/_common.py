"""Helpers shared by the benchmarks: timing, medians, subprocesses, JSON, environment, tables.

This module imports only the standard library at the top, so a benchmark child process can
import it (e.g. for :class:`NumbaCompileProfiler`) without skewing an import-time measurement.
numba, numpy and threadpoolctl are imported lazily, inside the functions that need them.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"

#: Prefix of the one stdout line a child process uses to hand its JSON result back.
RESULT_MARKER = "BENCH_RESULT_JSON:"

#: Environment variables that change how numba compiles or runs; removed from child processes
#: unless a benchmark sets them on purpose.
_NUMBA_ENV = ("NUMBA_CACHE_DIR", "NUMBA_NRT_STATS", "NUMBA_DISABLE_JIT", "NUMBA_DEBUG",
              "NUMBA_OPT", "NUMBA_BOUNDSCHECK", "NUMBA_CHROME_TRACE")


# -- timing and statistics -----------------------------------------------------------------------
class Stopwatch:
    """``with Stopwatch() as sw: ...`` then ``sw.seconds`` (wall, perf_counter) and ``sw.cpu``."""

    def __enter__(self):
        self._t0 = time.perf_counter()
        self._c0 = time.process_time()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self._t0
        self.cpu = time.process_time() - self._c0
        return False


def summarize(values) -> dict:
    """``{median, min, max, n, values}`` of the non-None values (all None -> median None)."""
    vals = [float(v) for v in values if v is not None and not _isnan(v)]
    if not vals:
        return {"median": None, "min": None, "max": None, "n": 0, "values": []}
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals),
            "n": len(vals), "values": vals}


def _isnan(v) -> bool:
    try:
        return math.isnan(v)
    except TypeError:
        return False


def ratio(a, b):
    """``a / b`` or None when either is missing or b is 0."""
    if a is None or b is None or b == 0:
        return None
    return a / b


def alternate(contenders: dict, repeats: int, on_result=None) -> dict:
    """Run ``contenders`` (name -> zero-argument callable) as A B C A B C ... ``repeats`` times.

    Interleaving spreads slow drifts of the machine (thermal, other load) over every contender
    instead of penalising whichever ran last. Returns ``{name: [result of each repeat]}``.
    """
    results = {name: [] for name in contenders}
    for r in range(repeats):
        for name, fn in contenders.items():
            out = fn(r)
            results[name].append(out)
            if on_result is not None:
                on_result(name, r, out)
    return results


# -- formatting ----------------------------------------------------------------------------------
def fmt_time(seconds, unit: str | None = None) -> str:
    """Seconds as a short string with a unit (``s``, ``ms`` or ``µs``; chosen if not given)."""
    if seconds is None:
        return "-"
    if unit is None:
        a = abs(seconds)
        unit = "s" if a >= 1 else ("ms" if a >= 1e-3 else "µs")
    scale = {"s": 1.0, "ms": 1e3, "µs": 1e6, "us": 1e6}[unit]
    v = seconds * scale
    digits = 3 if abs(v) < 10 else (2 if abs(v) < 100 else 1)
    return f"{v:.{digits}f} {unit}"


def fmt_ratio(x) -> str:
    return "-" if x is None else f"{x:.2f}x"


def fmt_num(x, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) < 1e15):
        return str(int(x))
    return f"{x:.{digits}f}"


def format_table(headers, rows, title: str | None = None, align=None) -> str:
    """Plain-text table; ``align`` is a string of ``l``/``r`` per column (default l then r)."""
    rows = [["" if c is None else str(c) for c in row] for row in rows]
    headers = [str(h) for h in headers]
    ncol = len(headers)
    align = align or ("l" + "r" * (ncol - 1))
    widths = [max([len(headers[i])] + [len(r[i]) for r in rows if i < len(r)]) for i in range(ncol)]

    def line(cells):
        out = []
        for i in range(ncol):
            c = cells[i] if i < len(cells) else ""
            out.append(c.ljust(widths[i]) if align[i] == "l" else c.rjust(widths[i]))
        return "  ".join(out).rstrip()

    sep = "  ".join("-" * w for w in widths)
    parts = []
    if title:
        parts.append(title)
    parts += [line(headers), sep] + [line(r) for r in rows]
    return "\n".join(parts)


def print_table(headers, rows, title: str | None = None, align=None) -> str:
    text = format_table(headers, rows, title, align)
    print(text, flush=True)
    print(flush=True)
    return text


def summary_cells(s: dict, fmt=fmt_time) -> list[str]:
    """``[median, min, max]`` cells of a :func:`summarize` dict."""
    return [fmt(s.get("median")), fmt(s.get("min")), fmt(s.get("max"))]


# -- subprocesses --------------------------------------------------------------------------------
def child_env(**overrides) -> dict:
    """``os.environ`` without numba knobs, plus ``overrides`` (a value of None removes the key)."""
    env = {k: v for k, v in os.environ.items() if k not in _NUMBA_ENV}
    for k, v in overrides.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


def run_child(code: str, env: dict | None = None, timeout: float = 900) -> dict:
    """Run ``code`` with this interpreter (``python -c``) in the repository root.

    The child prints ``RESULT_MARKER + json`` once; that dict is returned with two extra keys:
    ``_launch_monotonic`` (``time.monotonic()`` in this process just before the launch; on Linux
    the monotonic clock is system-wide, so a child's ``time.monotonic()`` can be subtracted from
    it) and ``_wall_s`` (launch to exit).
    """
    launch = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env or child_env(),
                          capture_output=True, text=True, timeout=timeout)
    wall = time.monotonic() - launch
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child failed (exit {proc.returncode}):\n"
                           f"{proc.stderr[-4000:]}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_MARKER)]
    if not lines:
        raise RuntimeError(f"benchmark child printed no result:\n{proc.stdout[-2000:]}\n"
                           f"{proc.stderr[-2000:]}")
    result = json.loads(lines[-1][len(RESULT_MARKER):])
    result["_launch_monotonic"] = launch
    result["_wall_s"] = wall
    return result


def emit_result(result: dict) -> None:
    """Child side of :func:`run_child`."""
    print(RESULT_MARKER + json.dumps(result, default=_json_default), flush=True)


@contextlib.contextmanager
def temp_dir(prefix: str = "nnjit-bench-"):
    path = tempfile.mkdtemp(prefix=prefix)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def dir_size(path) -> tuple[int, int]:
    """(number of files, total bytes) under ``path``."""
    n = size = 0
    for root, _, files in os.walk(path):
        for f in files:
            n += 1
            with contextlib.suppress(OSError):
                size += os.path.getsize(os.path.join(root, f))
    return n, size


def import_profile(module: str, env: dict | None = None) -> dict:
    """``python -X importtime -c "import <module>"``: self time summed per top-level package.

    Returns ``{"total_s": cumulative time of <module>, "packages": {package: seconds}}``.
    """
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                          cwd=REPO_ROOT, env=env or child_env(), capture_output=True, text=True,
                          timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"import {module} failed:\n{proc.stderr[-2000:]}")
    packages = defaultdict(float)
    total = None
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        parts = line[len("import time:"):].split("|")
        try:
            self_us, cum_us = int(parts[0]), int(parts[1])
        except ValueError:  # the header line
            continue
        name = parts[2].strip()
        packages[name.split(".")[0]] += self_us / 1e6
        if name == module:
            total = cum_us / 1e6
    return {"total_s": total, "packages": dict(packages)}


# -- numba compile profiling ---------------------------------------------------------------------
class NumbaCompileProfiler:
    """Record numba's compile events and split compile time by function, pass and LLVM.

    Listens to ``numba:compile`` (one per dispatcher compile, nested when a function compiles
    its callees), ``numba:run_pass`` (compiler passes) and ``numba:llvm_lock`` (time holding the
    LLVM lock: IR optimisation and machine-code generation). Times are *exclusive*: a nested
    compile is charged to the callee, not to its caller's type-inference pass. It also times
    numba's on-disk cache (``Cache.load_overload`` / ``save_overload``, patched while active).
    Install it after numba is imported (installing imports ``numba.core.event``).
    """

    KINDS = ("numba:compile", "numba:run_pass", "numba:llvm_lock")

    def __init__(self):
        self.events: list[tuple[float, str, bool, str]] = []
        self.cache = {"load": [0, 0.0], "save": [0, 0.0]}
        self._listener = None
        self._patched = []

    def __enter__(self):
        from numba.core import caching
        from numba.core import event as ev

        events = self.events

        def name_of(e):
            data = e.data or {}
            if e.kind == "numba:compile":
                d = data.get("dispatcher")
                fn = getattr(d, "py_func", None)
                if fn is not None:
                    return f"{fn.__module__}.{fn.__qualname__}"
                return str(d)
            if e.kind == "numba:run_pass":
                return str(data.get("name", "?"))
            return "llvm"

        class _Listener(ev.Listener):
            def on_start(self, e):
                events.append((time.perf_counter(), e.kind, True, name_of(e)))

            def on_end(self, e):
                events.append((time.perf_counter(), e.kind, False, ""))

        self._listener = _Listener()
        for kind in self.KINDS:
            ev.register(kind, self._listener)

        for op in ("load", "save"):
            attr = f"{op}_overload"
            original = getattr(caching.Cache, attr)
            self._patched.append((caching.Cache, attr, original))
            setattr(caching.Cache, attr, self._timed(original, self.cache[op]))
        return self

    @staticmethod
    def _timed(original, acc):
        depth = [0]

        def wrapper(*args, **kwargs):
            depth[0] += 1
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    acc[0] += 1
                    acc[1] += time.perf_counter() - t0

        return wrapper

    def __exit__(self, *exc):
        from numba.core import event as ev

        for kind in self.KINDS:
            ev.unregister(kind, self._listener)
        for cls, attr, original in self._patched:
            setattr(cls, attr, original)
        self._patched.clear()
        return False

    def summary(self, top: int = 6) -> dict:
        total = defaultdict(float)  # wall time with at least one event of the kind open
        exclusive = {k: defaultdict(float) for k in self.KINDS}
        fn_llvm = defaultdict(float)  # LLVM-lock time charged to the innermost compiling function
        count = defaultdict(int)
        stacks = {k: [] for k in self.KINDS}
        last = {}
        outer = {}
        prev_t = None
        for t, kind, start, name in self.events:
            fstack = stacks["numba:compile"]
            if prev_t is not None and fstack and stacks["numba:llvm_lock"]:
                fn_llvm[fstack[-1]] += t - prev_t
            prev_t = t
            st = stacks[kind]
            if start:
                if st:
                    exclusive[kind][st[-1]] += t - last[kind]
                else:
                    outer[kind] = t
                st.append(name)
                count[kind] += 1
            else:
                if not st:
                    continue
                exclusive[kind][st.pop()] += t - last[kind]
                if not st:
                    total[kind] += t - outer[kind]
            last[kind] = t

        functions = sorted(exclusive["numba:compile"].items(), key=lambda kv: -kv[1])[:top]
        passes = sorted(exclusive["numba:run_pass"].items(), key=lambda kv: -kv[1])[:top]
        return {
            "compile_s": total["numba:compile"],
            "llvm_s": total["numba:llvm_lock"],
            "n_compiles": count["numba:compile"],
            "cache_loads": self.cache["load"][0], "cache_load_s": self.cache["load"][1],
            "cache_saves": self.cache["save"][0], "cache_save_s": self.cache["save"][1],
            # [name, exclusive seconds, of which LLVM seconds]
            "top_functions": [[n, s, fn_llvm.get(n, 0.0)] for n, s in functions],
            "top_passes": [[n, s] for n, s in passes],
        }


# -- environment ---------------------------------------------------------------------------------
def cpu_model() -> str:
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def loadavg():
    with contextlib.suppress(OSError, AttributeError):
        return list(os.getloadavg())
    return None


def blas_info() -> list[dict]:
    """Loaded BLAS libraries in this process (threadpoolctl), without huge fields."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    keep = ("user_api", "internal_api", "prefix", "version", "num_threads", "threading_layer",
            "architecture", "filepath")
    return [{k: lib.get(k) for k in keep} for lib in threadpool_info()
            if lib.get("user_api") == "blas"]


def package_versions(*names) -> dict:
    from importlib import metadata

    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def environment_info(**extra) -> dict:
    """Versions, CPU, core counts, git revision and ``extra``; imports numba and numpy."""
    import numba
    import numpy

    info = {
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "numba": numba.__version__,
        "numpy": numpy.__version__,
        "llvmlite": package_versions("llvmlite")["llvmlite"],
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "git_revision": git_revision(),
        "openblas_env": openblas_environment(),
    }
    info.update(extra)
    return info


def openblas_environment() -> dict:
    """The OpenBLAS variables as the process started (one nnjit sets itself is reported apart)."""
    env = {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    threads = sys.modules.get("nnjit.train.threads")
    by_nnjit = getattr(threads, "CORETYPE_SET_BY_NNJIT", None)
    if by_nnjit is not None and env["OPENBLAS_CORETYPE"] == by_nnjit:
        env["OPENBLAS_CORETYPE"] = None
        env["OPENBLAS_CORETYPE set by nnjit"] = by_nnjit
    return env


def blas_kernel_warning() -> str | None:
    """A warning when OpenBLAS was told which kernels to run (``OPENBLAS_CORETYPE``), else None.

    Some machines set ``OPENBLAS_CORETYPE=Haswell`` (and ``OPENBLAS_L2_SIZE``) for older OpenBLAS
    builds: every OpenBLAS in the process, numpy's (scikit-learn) and scipy's (nnjit), then runs
    its AVX2 kernels, about half the speed of the AVX-512 ones on an AVX-512 CPU. Both sides are
    slowed alike, but neither runs as the machine allows."""
    core = os.environ.get("OPENBLAS_CORETYPE")
    threads = sys.modules.get("nnjit.train.threads")
    if not core or core == getattr(threads, "CORETYPE_SET_BY_NNJIT", None):
        return None  # unset, or nnjit's own choice for an AVX-512 CPU OpenBLAS does not know
    return (f"OPENBLAS_CORETYPE={core} is set: every OpenBLAS runs its {core} kernels; to measure "
            "with the kernels OpenBLAS picks for this CPU run `python -m benchmarks --native-blas` "
            "or `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m benchmarks.NAME` (the "
            "environment table shows each library's kernels)")


def finish(res: dict, out, warnings, report) -> dict:
    """The end every benchmark shares: ``res["warnings"] = warnings(res)`` plus the BLAS-kernel
    warning, print the report, write the JSON to ``out`` and say where. Returns ``res``."""
    res["warnings"] = [w for w in [*warnings(res), blas_kernel_warning()] if w]
    report(res)
    path = write_json(out, res)
    print(f"wrote {path}", flush=True)
    return res


def load_rows(env: dict) -> list[list[str]]:
    """The environment table's rows of the load average before and after the run."""
    return [[f"load average {when}", " ".join(f"{x:.2f}" for x in env[f"loadavg_{when}"] or [])]
            for when in ("before", "after")]


def revision_rows(res: dict) -> list[list[str]]:
    """The environment table's last rows: the git revision measured and the run's wall time."""
    return [["git revision", str(res["environment"].get("git_revision"))],
            ["benchmark wall time", fmt_time(res["benchmark_wall_s"])]]


def print_environment(rows, res: dict, title: str) -> None:
    """Print the environment table (``rows`` of item, value) and then the run's warnings."""
    print_table(["item", "value"], rows, title, align="ll")
    for w in res.get("warnings", []):
        print(f"WARNING: {w}", flush=True)


def load_warning(env: dict, detail: str = "other processes may have competed for the CPU"):
    """A warning when the machine was busy at the start (load average above half the cores),
    else None. Only the load before the start counts: a benchmark itself adds about 1."""
    cores = env.get("cpu_affinity") or env.get("cpu_count") or 1
    before = (env.get("loadavg_before") or [0])[0]
    if before > 0.5 * cores:
        return f"1-minute load average was {before:.2f} on {cores} cores at the start: {detail}"
    return None


def git_revision() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


# -- JSON ----------------------------------------------------------------------------------------
def _json_default(o):
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None
    if np is not None:
        if isinstance(o, np.integer):
            return int(o)
        if isinstance(o, np.floating):
            return float(o)
        if isinstance(o, np.ndarray):
            return o.tolist()
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def write_json(name_or_path, data: dict) -> Path:
    """Write ``data`` to ``benchmarks/results/<name>.json`` (or to a given path); returns it."""
    path = Path(name_or_path)
    if path.suffix != ".json":
        path = RESULTS_DIR / f"{name_or_path}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"written_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), **data}
    tmp = path.with_suffix(".json.tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, default=_json_default, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)
    return path


# -- added for benchmarks.scale and benchmarks.memory ---------------------------------------------
def shared_data_path(name: str) -> Path | None:
    """Path of ``name`` in the shared data folder (``../shared/data`` beside the repository, or
    ``$NNJIT_SHARED_DATA``), or None when the file is not there."""
    roots = [os.environ.get("NNJIT_SHARED_DATA"), REPO_ROOT.parent / "shared" / "data"]
    for root in roots:
        if root and (Path(root) / name).is_file():
            return Path(root) / name
    return None


def rss_now() -> dict:
    """Memory of this process in bytes: ``rss`` (current resident set), ``peak`` and ``ru_maxrss``.

    ``peak`` is ``VmHWM`` from ``/proc/self/status``: the high-water mark of this process image.
    ``ru_maxrss`` is ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` (kilobytes on Linux, bytes on
    macOS); on Linux it survives ``fork`` + ``exec``, so a child started by a big parent reports
    the parent's size until it grows past it. ``peak`` falls back to it where there is no /proc.
    """
    import resource

    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    maxrss = maxrss if sys.platform == "darwin" else maxrss * 1024
    rss = hwm = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    value = int(line.split()[1]) * 1024  # kB
                    if line.startswith("VmRSS:"):
                        rss = value
                    else:
                        hwm = value
    return {"rss": rss, "peak": hwm if hwm is not None else maxrss, "ru_maxrss": maxrss}


def count_nrt_allocations(run, repeats=(2, 12)) -> list[dict]:
    """NRT allocations and frees made by ``run(k)`` for each k in ``repeats``, in this process.

    The recipe of ``tests/helpers.py::count_allocations``: numba's allocation statistics are
    enabled in-process (they are off unless ``NUMBA_NRT_STATS=1``) and restored afterwards. Call
    ``run`` once before (compile / cache load, layout). Returns ``[{"alloc", "free"}, ...]``.
    """
    from numba.core.runtime import _nrt_python, rtsys

    was_enabled = _nrt_python.memsys_stats_enabled()
    _nrt_python.memsys_enable_stats()
    try:
        counts = []
        for k in repeats:
            s0 = rtsys.get_allocation_stats()
            run(k)
            s1 = rtsys.get_allocation_stats()
            counts.append({"alloc": s1.alloc - s0.alloc, "free": s1.free - s0.free})
        return counts
    finally:
        if not was_enabled:
            _nrt_python.memsys_disable_stats()


def import_torch_single_thread():
    """``(torch, None)`` with ``torch.set_num_threads(1)`` applied, or ``(None, reason)``."""
    try:
        import torch
    except ImportError as e:
        return None, f"skipped: PyTorch not installed ({e})"
    torch.set_num_threads(1)
    with contextlib.suppress(RuntimeError):  # only settable before the first parallel op
        torch.set_num_interop_threads(1)
    return torch, None


def mlp_forward_flops(sizes) -> int:
    """Matrix-multiply FLOPs of one sample's forward pass through dense layers ``sizes``
    (e.g. ``(784, 256, 256, 10)``): ``2 * sum(in * out)``; biases and activations not counted."""
    return 2 * sum(a * b for a, b in zip(sizes[:-1], sizes[1:]))


def out_path(out: str, default_name: str) -> str:
    """Resolve ``--out``: a results name, a ``.json`` path, or a directory (``dir/<name>.json``)."""
    if out and os.path.isdir(out):
        return os.path.join(out, f"{default_name}.json")
    return out or default_name


# -- added for benchmarks.seed_table -------------------------------------------------------------
def pin_to_one_cpu(cpu: int | None = None) -> dict | None:
    """Pin every thread of this process (and the threads it creates later) to one CPU.

    Some peers ignore their thread settings (XLA keeps a thread pool whatever ``XLA_FLAGS``
    say: a JAX fit used ~1.9 CPUs on this 2-core machine); pinning is the one limit every library
    obeys. ``cpu`` defaults to the highest-numbered CPU this process may use. Returns
    ``{"cpu", "previous"}``, or None where ``sched_setaffinity`` does not exist (not Linux).
    """
    if not hasattr(os, "sched_setaffinity"):
        return None
    previous = sorted(os.sched_getaffinity(0))
    cpu = previous[-1] if cpu is None else int(cpu)
    for tid in _thread_ids():
        with contextlib.suppress(OSError):  # a thread may have exited meanwhile
            os.sched_setaffinity(tid, {cpu})
    return {"cpu": cpu, "previous": previous}


def thread_affinities() -> dict[int, list[int]]:
    """CPU affinity of every thread of this process (Linux; empty elsewhere)."""
    if not hasattr(os, "sched_getaffinity"):
        return {}
    out = {}
    for tid in _thread_ids():
        with contextlib.suppress(OSError):
            out[tid] = sorted(os.sched_getaffinity(tid))
    return out


def _thread_ids() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


# -- added for benchmarks.parallel ---------------------------------------------------------------
class OtherLoad:
    """CPU used by *other* processes while the block runs: ``with OtherLoad() as o: ...`` then
    ``o.cores`` (average number of cores they kept busy) and ``o.seconds`` (CPU seconds).

    System-wide busy time from ``/proc/stat`` minus this process's CPU time. Parallel kernels need
    an idle second core, so a benchmark of them is only meaningful where ``cores`` stays near 0.
    None where there is no ``/proc/stat`` (not Linux).
    """

    @staticmethod
    def _busy_seconds():
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")

    def __enter__(self):
        self._b0 = self._busy_seconds()
        self._c0 = time.process_time()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        b1 = self._busy_seconds()
        wall = time.perf_counter() - self._t0
        if self._b0 is None or b1 is None or wall <= 0:
            self.seconds = self.cores = None
        else:
            self.seconds = max(0.0, (b1 - self._b0) - (time.process_time() - self._c0))
            self.cores = self.seconds / wall
        return False


def guarded(fn, *args) -> dict:
    """A benchmark section's result, or ``{"error": ...}`` so that one failing section does not
    hide the others (the traceback goes to stderr; the error reaches the table, the JSON and the
    exit status)."""
    try:
        return fn(*args)
    except Exception as e:
        import traceback

        print(traceback.format_exc(), file=sys.stderr, flush=True)
        return {"error": f"{type(e).__name__}: {e}"}
