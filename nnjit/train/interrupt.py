"""Ctrl-C during a fit: stop after the current epoch, or, at a second Ctrl-C, before the next job.

The compiled loop cannot see a signal: it holds no GIL and runs no Python. Python turns SIGINT
into a stop request written into the run state (:meth:`RunState.request_stop`), which the loop
reads before every epoch (``STOP_AFTER_EPOCH``: the epoch with its validation and best-weights
bookkeeping completes) and before every job (``STOP_NOW``). For that, Python must be running
while the loop does: a fit with one compiled call per epoch handles SIGINT between epochs, and
runs long calls in a helper thread (:class:`EpochCaller`); a verbose single-call fit runs the call
in a worker thread while the main thread polls (:func:`run_in_worker`).
"""

from __future__ import annotations

import contextlib
import sys
import threading

from nnjit.engine import status as st
from nnjit.train.run_state import RunState

POLL_SECONDS = 0.05  # how often the main thread looks at a threaded fit's progress


def in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class StopRequest:
    """Ctrl-C during a fit: ask the compiled loop to stop after the current epoch."""

    def __init__(self, state: RunState):
        self.state = state
        self.requested = False

    def request(self, now: bool = False) -> None:
        """Stop after the current epoch, or (``now``) before the running epoch's next job."""
        self.requested = True
        self.state.request_stop(now)

    def call_in_thread(self, execute, args):
        """``execute(*args)`` in a helper thread while this (main) thread waits, so Ctrl-C
        handlers run during a compiled epoch; leaving early asks the loop to stop now."""
        worker = Worker(lambda: execute(*args))
        worker.start()
        try:
            worker.done.wait()
        except KeyboardInterrupt:  # the second Ctrl-C (the handler asked for a stop now)
            stop_worker(worker, self)
            if worker.outcome.get("result", (None,))[0] == st.INTERRUPTED:
                return worker.outcome["result"]  # Program.run raises it, saying what was abandoned
            raise
        finally:
            stop_worker(worker, self)
        return worker.result()

    @contextlib.contextmanager
    def on_sigint(self):
        """While inside, SIGINT requests a stop; a second one raises KeyboardInterrupt in the
        Python code that runs (fit treats it as a stop between epochs). Only in the main
        thread, and only when SIGINT has Python's default handler."""
        import signal

        if not in_main_thread() or signal.getsignal(signal.SIGINT) is not \
                signal.default_int_handler:
            yield
            return

        def handler(signum, frame):
            if self.requested:
                self.request(now=True)  # the compiled loop stops before its next job
                signal.default_int_handler(signum, frame)
            print("\nfit: interrupted (Ctrl-C): stopping after the current epoch; the history is "
                  "kept and the best weights restored", file=sys.stderr, flush=True)
            self.request()

        previous = signal.signal(signal.SIGINT, handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


class EpochCaller:
    """Runs a chunked fit's compiled calls: directly while they are short, in a helper thread
    (:meth:`StopRequest.call_in_thread`, where a second Ctrl-C is seen mid-epoch) once one
    took longer than ``THREAD_AFTER_SECONDS`` or when the epoch looks long from the start
    (rows x parameters). A thread per call costs ~0.1-2 ms (more on a loaded machine)."""

    THREAD_AFTER_SECONDS = 0.05
    LONG_EPOCH_WORK = 5e7  # rows x parameters of an epoch that takes tens of milliseconds

    def __init__(self, stop: StopRequest, work: float):
        self.stop = stop
        self.threaded = work >= self.LONG_EPOCH_WORK

    def __call__(self, execute, args):
        if self.threaded:
            return self.stop.call_in_thread(execute, args)
        import time

        start = time.perf_counter()
        result = execute(*args)
        self.threaded = time.perf_counter() - start > self.THREAD_AFTER_SECONDS
        return result


class Worker:
    """``fn()`` in a daemon thread; ``done`` is set when it has returned or raised.

    Completion is an Event, not ``Thread.is_alive()``: on Python 3.11 a ``join`` interrupted by
    KeyboardInterrupt can mark a running thread as stopped, and a process that then exits while
    the compiled loop still writes its arrays crashes (SIGSEGV).
    """

    def __init__(self, fn):
        self.outcome: dict = {}
        self.done = threading.Event()

        def work():
            try:
                self.outcome["result"] = fn()
            except BaseException as e:  # re-raised by result()
                self.outcome["error"] = e
            finally:
                self.done.set()

        self.thread = threading.Thread(target=work, name="nnjit-fit", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def result(self):
        if "error" in self.outcome:
            raise self.outcome["error"]
        return self.outcome["result"]


def stop_worker(worker: Worker, stop: StopRequest) -> None:
    """Wait for a compiled call running in ``worker``, asking it to stop before its next job."""
    while not worker.done.is_set():
        stop.request(now=True)
        worker.done.wait(POLL_SECONDS)


def run_in_worker(run, stop: StopRequest, poll, finish):
    """``run()`` (a compiled call that releases the GIL) in a worker thread while this (main)
    thread calls ``poll()`` every :data:`POLL_SECONDS` and turns Ctrl-C into a stop request that
    the compiled loop honours after the current epoch; ``finish()`` runs once the call is over
    (whatever happened). Returns what ``run`` returned, or raises what it raised."""
    worker = Worker(run)
    try:
        with stop.on_sigint():
            worker.start()
            while not worker.done.wait(POLL_SECONDS):
                poll()
    except BaseException:  # a second Ctrl-C (or an error here): stop before the next job
        stop_worker(worker, stop)
        if isinstance(worker.outcome.get("error"), KeyboardInterrupt):
            raise worker.outcome["error"] from None  # (its message says what was abandoned)
        raise
    finally:
        stop_worker(worker, stop)  # never leave the arrays to a running loop
        finish()
    return worker.result()
