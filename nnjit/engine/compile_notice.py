"""The one line nnjit prints on stderr when it compiles a training loop (a first run only).

The compiled interpreter (:func:`nnjit.engine.interpreter.execute`, one build per arena dtype, and
its graph build) takes 10-60 s to compile, then numba caches it on disk and later processes load
it in well under a second. Numba compiles silently, so a first fit looked hung. Numba's event API
fires ``"numba:compile"`` only after both the dispatcher's in-process overloads and its on-disk
cache missed (``Dispatcher.compile``), so a listener on that event speaks exactly when a build is
really compiled: never in a process that loads it from the cache, never twice for one build, and
at no cost on the call path (numba calls it only when it compiles).

The notice is printed whatever ``verbose`` says: it is not training progress but the reason for
a stall that happens once per build and installation, in ``fit``, ``predict``, ``evaluate``,
``gradients`` and ``nnjit warmup`` alike. Set the environment variable ``NNJIT_COMPILE_NOTICE=0``
to silence it (e.g. a tool that parses stderr).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import time

try:
    import fcntl
except ImportError:  # Windows: no lock, each process compiles what it misses
    fcntl = None

from numba.core import event as numba_event

from nnjit.kernels.cache_locator import caches_on_disk

#: Cold compile time of each build per dtype, in seconds, as the notice states it ("about N s"):
#: a fresh clone on the project machine (2-core AMD EPYC, numba 0.68); see docs/performance.md.
ESTIMATED_SECONDS = {"the training loop": 17, "the graph training loop": 22}

#: Any other build (the training loop with other extra op families, e.g. a user's): the core
#: plus the families' dispatchers, stated as the graph build, the extra-family build measured.
EXTRA_FAMILIES_SECONDS = ESTIMATED_SECONDS["the graph training loop"]

#: The command that compiles each build ahead of time, named in the notice ("" leaves it out,
#: e.g. while that command itself runs).
WARMUP_COMMAND = {"the training loop": "nnjit warmup", "the graph training loop":
                  "nnjit warmup --graph"}

_watched: dict[int, tuple[object, str, int]] = {}  # id(dispatcher) -> (dispatcher, what, arg)
_started: dict[tuple, float] = {}  # (id(dispatcher), argument types) -> start time
_compiled_seconds = [0.0]  # total over the watched compiles finished in this process


def watch(dispatcher, what: str, dtype_arg: int) -> None:
    """Announce compiles of ``dispatcher`` as ``what`` ("the training loop"), naming the dtype
    of its argument number ``dtype_arg`` (the arena). Idempotent; a plain function (under
    ``NUMBA_DISABLE_JIT=1``) is ignored."""
    if hasattr(dispatcher, "overloads"):
        _watched[id(dispatcher)] = (dispatcher, what, dtype_arg)


def compile_seconds() -> float:
    """Seconds this process spent compiling watched builds (0.0 when everything came from the
    cache), e.g. to split a first fit's time into compiling and training."""
    return _compiled_seconds[0]


def enabled() -> bool:
    """False when ``NNJIT_COMPILE_NOTICE`` is ``0`` (or ``false``, ``no``, ``off``)."""
    return os.environ.get("NNJIT_COMPILE_NOTICE", "1").strip().lower() not in (
        "0", "false", "no", "off")


_hints = [True]  # False while `nnjit warmup` runs: no suggesting the command that is running


@contextlib.contextmanager
def no_warmup_hint():
    """Within it, the start message does not suggest ``nnjit warmup`` (the warmup command)."""
    _hints.append(False)
    try:
        yield
    finally:
        _hints.pop()


def start_message(what: str, dtype: str) -> str:
    hint = WARMUP_COMMAND.get(what, "") if _hints[-1] else ""
    ahead = f"; `{hint}` does this ahead of time" if hint else ""
    return (f"nnjit: compiling {what} for {dtype} (first run only, about "
            f"{ESTIMATED_SECONDS.get(what, EXTRA_FAMILIES_SECONDS)} s{ahead})")


def end_message(seconds: float, cached: bool = True) -> str:
    where = "cached for next time" if cached else "not cached"  # (a warning said why)
    return f"nnjit: compiled in {seconds:.1f} s ({where})"


def ensure_compiled(dispatcher, args) -> None:
    """Compile (or load from numba's cache) the overload of ``dispatcher`` that a call with
    ``args`` will run, now, so that a caller can start its clocks after it. Costs the argument
    typing (tens of microseconds) when the overload is already there.

    Processes that need the same build at the same time (test workers, a Dask cluster's
    workers, ``mpirun`` ranks) compile it once: the first holds a lock file next to numba's
    cache files for that build and signature, the others wait for it and load its cache."""
    compile_ = getattr(dispatcher, "compile", None)
    if compile_ is None:  # (a plain function under NUMBA_DISABLE_JIT=1)
        return
    signature = tuple(dispatcher.typeof_pyval(a) for a in args)
    if signature in dispatcher.overloads:
        return
    with _compile_lock(dispatcher, signature):
        compile_(signature)


@contextlib.contextmanager
def _compile_lock(dispatcher, signature):
    """An exclusive lock across processes on compiling ``dispatcher`` for ``signature``, held
    in numba's cache folder for it (nnjit's own, checked by :mod:`nnjit.kernels.cache_locator`);
    no lock where there is no on-disk cache or no ``fcntl`` (Windows)."""
    cache = getattr(dispatcher, "_cache", None)
    folder = getattr(cache, "_cache_path", None)
    index = getattr(getattr(cache, "_cache_file", None), "_index_name", None)
    if fcntl is None or not folder or not index or not os.path.isdir(folder):
        yield
        return
    key = hashlib.sha256(f"{index} {signature}".encode()).hexdigest()[:16]
    try:
        fd = os.open(os.path.join(folder, f"{index}.{key}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:  # a read-only cache folder: numba will not write there either
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # (releases the GIL while it waits)
        yield
    finally:
        os.close(fd)  # (releases the lock)


def _say(text: str) -> None:
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):  # stderr closed or None (pythonw)
        pass


class _Listener(numba_event.Listener):
    """Prints the notice when numba starts compiling a watched dispatcher and the time taken
    when it is done (numba holds its compiler lock meanwhile, so calls never interleave)."""

    def on_start(self, event):
        data = event.data or {}
        entry = _watched.get(id(data.get("dispatcher")))
        if entry is None:
            return
        dispatcher, what, dtype_arg = entry
        args = tuple(data.get("args") or ())
        _started[(id(dispatcher), args)] = time.perf_counter()
        if enabled():
            dtype = getattr(args[dtype_arg], "dtype", "?") if len(args) > dtype_arg else "?"
            _say(start_message(what, str(dtype)))

    def on_end(self, event):
        data = event.data or {}
        dispatcher = data.get("dispatcher")
        args = tuple(data.get("args") or ())
        start = _started.pop((id(dispatcher), args), None)
        # a failed compile adds no overload; numba's own error then tells the story
        if start is None or args not in dispatcher.overloads:
            return
        seconds = time.perf_counter() - start
        _compiled_seconds[0] += seconds
        if enabled():
            _say(end_message(seconds, caches_on_disk(dispatcher)))


numba_event.register("numba:compile", _Listener())
