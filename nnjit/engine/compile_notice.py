"""What nnjit prints on stderr while it compiles (a first run only).

nnjit compiles in pieces (:mod:`nnjit.engine.dispatch`): the training loop once per dtype, each op
family beyond the core once, a few small loaders and hooks. Numba caches each piece on disk and
later processes load it in well under a second, but numba compiles silently, so a first fit
looked hung. Numba's event API fires ``"numba:compile"`` only after both the dispatcher's
in-process overloads and its on-disk cache missed (``Dispatcher.compile``), so a listener on that
event speaks exactly when a piece is really compiled: never in a process that loads it from the
cache, never twice for one piece, and at no cost on the call path.

A piece expected to take :data:`QUIET_BELOW` seconds or more says so when it starts ("compiling
the conv family for float32 (first run only, about 8 s)") and how long it took when done; while
any piece compiles, a line every :data:`TICK_SECONDS` says it still does, so a terminal is never
silent. The notice is printed whatever ``verbose`` says: it is not training progress but the
reason for a stall that happens once per piece and installation, in ``fit``, ``predict``,
``evaluate``, ``gradients`` and ``nnjit warmup`` alike. Set the environment variable
``NNJIT_COMPILE_NOTICE=0`` to silence it (e.g. a tool that parses stderr).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import sys
import threading
import time

try:
    import fcntl
except ImportError:  # Windows: no lock, each process compiles what it misses
    fcntl = None

from numba.core import event as numba_event

from nnjit.kernels.cache_locator import caches_on_disk

#: Cold compile time of each piece, in CPU seconds, as the notice states it ("about N s"): a
#: fresh clone on the project machine (2-core Xeon, numba 0.68, empty cache, each piece the
#: first to need its kernels); docs/performance.md, "The first run".
ESTIMATED_SECONDS = {
    "the training loop": 12,
    "the elementwise family": 1,
    "the dropout family": 1,
    "the conv family": 9,
    # (scaled from the conv family's: 18-20 against 24-27 s CPU in the same loaded runs)
    "the conv_lanes family": 7,
    # (9.1-9.5 s CPU against conv_lanes' 12.1-12.2 in the same loaded runs, scaled to its 7)
    "the conv_winograd family": 5,
    "the pooling family": 4,
    "the normalization family": 3,
    "the embedding family": 1,
    "the joining family": 1,
    "the recurrent family": 13,
    "the sparse family": 3,
    "the graph family": 7,
    "the graph batch loader": 2,
    "the batch loader": 1,
    "the augmenting batch loader": 2,
    "the training loop's hooks": 0,
    "the SGD step": 0,
    "the Adam step": 0,
    "the RMSprop step": 0,
    "the Adagrad step": 0,
    "the Adadelta step": 0,
    "the Adamax step": 0,
    "the NAdam step": 0,
    "the RAdam step": 0,
    "the MPI hooks": 1,
}

#: Any other piece (a user's op family): what a small family measured.
OTHER_PIECE_SECONDS = 3

#: Pieces estimated below this many seconds compile without a start line (unless they pass
#: TICK_SECONDS).
QUIET_BELOW = 2

#: While a piece compiles, a line every this many seconds says it still does.
TICK_SECONDS = 10.0

#: A process waiting for another's compile of the same build says so after this many seconds
#: ("waiting for process N compiling ...").
LOCK_NOTICE_SECONDS = 10.0

#: ... and compiles without the lock after this many (the holder may be stopped with Ctrl-Z, or
#: hung): a bounded wait, at worst a compile done twice.
LOCK_WAIT_SECONDS = 180.0

#: The command that compiles every piece ahead of time, named in the notice (not while that
#: command itself runs: :func:`no_warmup_hint`).
WARMUP_COMMAND = "nnjit warmup"

# id(dispatcher) -> (dispatcher, what and the arena argument's index | its _Piece and None)
_watched: dict[int, tuple] = {}
_started: dict[tuple, "_Piece"] = {}  # (id(dispatcher), argument types) -> its piece
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


def estimated_seconds(what: str) -> int:
    """The notice's estimate for the piece called ``what``: the project machine's time
    (:data:`ESTIMATED_SECONDS`) at this machine's pace, once a piece compiled here."""
    base = ESTIMATED_SECONDS.get(what, OTHER_PIECE_SECONDS)
    return max(round(base * _pace[0]), 1) if base else 0


def start_message(what: str, dtype: str) -> str:
    ahead = f"; `{WARMUP_COMMAND}` does this ahead of time" if _hints[-1] else ""
    about = estimated_seconds(what)
    # before any piece set this machine's pace: the project machine's time, up to twice it
    span = f"{about}-{2 * about}" if _pace[0] == 1.0 and about else f"{about}"
    return f"nnjit: compiling {what} for {dtype} (first run only, about {span} s{ahead})"


def tick_message(what: str, seconds: float) -> str:
    late = estimated_seconds(what) * (2 if _pace[0] == 1.0 else 1)
    more = " (longer than estimated: a slower or busy machine; it goes on)" \
        if seconds > late else ""
    return f"nnjit: still compiling {what}, {seconds:.0f} s{more}"


#: This machine's seconds per estimated second, from the last piece that compiled here with an
#: estimate of QUIET_BELOW or more (1.0 until then): later notices in the process scale by it.
_pace = [1.0]


def end_message(seconds: float, cached: bool = True) -> str:
    where = "cached for next time" if cached else "not cached"  # (a warning said why)
    return f"nnjit: compiled in {seconds:.1f} s ({where})"


def compile_now(pieces, what: str, dtype: str) -> None:
    """Compile (or load from numba's cache) each ``(dispatcher, signature)`` of ``pieces`` now,
    announced together as one piece called ``what`` for ``dtype`` when any really compiles (a
    dispatch table entry, :mod:`nnjit.engine.dispatch`: a family's forward and backward); one
    process at a time, as :func:`ensure_compiled`."""
    todo = [(d, s) for d, s in pieces if tuple(s.args) not in d.overloads]
    if not todo:
        return
    piece = _Piece(what, dtype)
    try:
        for dispatcher, signature in todo:
            _watched[id(dispatcher)] = (dispatcher, piece, None)
            with _compile_lock(dispatcher, tuple(signature.args)):
                dispatcher.compile(signature)
    finally:
        piece.finish(caches_on_disk(todo[0][0]))


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


def _piece_name(dispatcher) -> str:
    what = _watched.get(id(dispatcher), (None, None))[1]
    if isinstance(what, _Piece):
        return what.what
    return what or f"{getattr(dispatcher, '__name__', 'a function')}"


@contextlib.contextmanager
def _compile_lock(dispatcher, signature):
    """An exclusive lock across processes on compiling ``dispatcher`` for ``signature``, held
    in numba's cache folder for it (checked by :mod:`nnjit.kernels.cache_locator`); no lock
    where there is no on-disk cache or no ``fcntl`` (Windows). A symbolic link or a non-regular
    file at the lock's path is refused (one line; compiled without the lock); a wait says so
    after :data:`LOCK_NOTICE_SECONDS` and ends after :data:`LOCK_WAIT_SECONDS`."""
    cache = getattr(dispatcher, "_cache", None)
    folder = getattr(cache, "_cache_path", None)
    index = getattr(getattr(cache, "_cache_file", None), "_index_name", None)
    if fcntl is None or not folder or not index or not os.path.isdir(folder):
        yield
        return
    key = hashlib.sha256(f"{index} {signature}".encode()).hexdigest()[:16]
    path = os.path.join(folder, f"{index}.{key}.lock")
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0), 0o600)
    except OSError as error:  # a read-only cache folder: numba will not write there either
        if error.errno == errno.ELOOP:
            _say(f"nnjit: warning: the compile lock {path} is a symbolic link: refused, "
                 f"compiling without the lock")
        yield
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            _say(f"nnjit: warning: the compile lock {path} is not a regular file: refused, "
                 f"compiling without the lock")
        elif _acquire(fd, path, _piece_name(dispatcher)):
            with contextlib.suppress(OSError):  # (who holds it, for the waiters' message)
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # (releases the lock)


def _acquire(fd: int, path: str, what: str) -> bool:
    """Take the lock on ``fd``, polling (the GIL is free meanwhile); False after
    :data:`LOCK_WAIT_SECONDS` without it."""
    start = time.monotonic()
    pause, said = 0.01, False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        except OSError:  # (a file system without locks: compile, as without fcntl)
            return False
        waited = time.monotonic() - start
        if waited >= LOCK_WAIT_SECONDS:
            _say(f"nnjit: process {_holder(fd)} has held the compile lock for {what} for "
                 f"{waited:.0f} s (stopped or hung?); compiling without it")
            return False
        if not said and waited >= LOCK_NOTICE_SECONDS:
            said = True
            _say(f"nnjit: waiting for process {_holder(fd)} compiling {what} (lock {path}; "
                 f"at most {LOCK_WAIT_SECONDS:.0f} s)")
        time.sleep(pause)
        pause = min(pause * 2, 0.25)


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 16, 0).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return "?"
    return text if text.isdigit() else "?"


def _say(text: str) -> None:
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):  # stderr closed or None (pythonw)
        pass


class _Piece:
    """One piece being compiled, of one or more dispatchers: it starts at numba's first compile
    event for it (a cache load has none) and says so, then, from a timer thread, every
    TICK_SECONDS that it still compiles (numba compiles in Python and LLVM calls, so the thread
    gets its turns)."""

    def __init__(self, what: str, dtype: str):
        self.what, self.dtype = what, dtype
        self.start = None  # perf_counter at the first compile, None while nothing compiled
        self.said = False
        self._done = threading.Event()

    def begin(self) -> None:
        if self.start is not None:
            return
        self.start = time.perf_counter()
        if not enabled():
            return
        if estimated_seconds(self.what) >= QUIET_BELOW:
            _say(start_message(self.what, self.dtype))
            self.said = True
        threading.Thread(target=self._tick, name="nnjit-compile-notice", daemon=True).start()

    def _tick(self) -> None:
        while not self._done.wait(TICK_SECONDS):
            if not self.said:  # a piece expected to be quick says what it is first
                _say(start_message(self.what, self.dtype))
                self.said = True
            _say(tick_message(self.what, time.perf_counter() - self.start))

    def finish(self, cached: bool) -> None:
        """The piece is done (compiled, loaded, or failed: numba's error tells that story)."""
        self._done.set()
        if self.start is None:
            return
        seconds = time.perf_counter() - self.start
        _compiled_seconds[0] += seconds
        base = ESTIMATED_SECONDS.get(self.what, OTHER_PIECE_SECONDS)
        if base >= QUIET_BELOW:  # (bounded: one odd piece must not make the notices absurd)
            _pace[0] = min(max(seconds / base, 0.5), 4.0)
        if self.said:
            _say(end_message(seconds, cached))


class _Listener(numba_event.Listener):
    """Starts a watched dispatcher's piece when numba starts compiling it; a dispatcher watched
    with :func:`watch` is a piece of its own that finishes with its compile (numba holds its
    compiler lock meanwhile, so compiles never interleave)."""

    def on_start(self, event):
        data = event.data or {}
        entry = _watched.get(id(data.get("dispatcher")))
        if entry is None:
            return
        dispatcher, what, dtype_arg = entry
        if isinstance(what, _Piece):  # (compile_now finishes it)
            what.begin()
            return
        args = tuple(data.get("args") or ())
        dtype = getattr(args[dtype_arg], "dtype", "?") if len(args) > dtype_arg else "?"
        piece = _started[(id(dispatcher), args)] = _Piece(what, str(dtype))
        piece.begin()

    def on_end(self, event):
        data = event.data or {}
        dispatcher = data.get("dispatcher")
        args = tuple(data.get("args") or ())
        piece = _started.pop((id(dispatcher), args), None)
        if piece is not None:
            # a failed compile adds no overload; numba's own error then tells the story
            if args in dispatcher.overloads:
                piece.finish(caches_on_disk(dispatcher))
            else:
                piece._done.set()


numba_event.register("numba:compile", _Listener())
