"""The one place that holds nnjit's ``@njit`` options.

Every compiled function in nnjit is decorated with :func:`jit`, so the flag set, the error model
and the cache policy are decided here and nowhere else (a test greps for stray ``fastmath=``).
"""

import numba

from nnjit.kernels import cache_locator

#: LLVM fast-math flags used by every compiled function. Deliberately *not* fast-math "True":
#: that adds ``nnan``/``ninf``, under which LLVM folds ``isnan``/``isfinite`` to constants and
#: NaN detection (early stopping on divergence) silently stops working.
FASTMATH = frozenset({"nsz", "arcp", "contract", "afn", "reassoc"})

JIT_OPTIONS = dict(
    nogil=True,
    # on disk where numba's own locators say, else in a private folder, else not at all
    # (nnjit.kernels.cache_locator): never by setting numba's global CACHE_DIR
    cache=True,
    fastmath=set(FASTMATH),
    # numba's default ("python") adds a zero-division check to every float division, which
    # blocks vectorisation (Adam steps about 9x slower; docs/performance.md).
    error_model="numpy",
)


def jit(fn=None, **overrides):
    """Compile ``fn`` with nnjit's options (``nogil``, ``cache``, fast-math flags, numpy errors)."""
    options = {**JIT_OPTIONS, **overrides}
    cache = options.pop("cache")

    def compile_(f):
        dispatcher = numba.njit(**options)(f)
        if cache and hasattr(dispatcher, "py_func"):  # (a plain function under NUMBA_DISABLE_JIT)
            cache_locator.enable_caching(dispatcher)
        return dispatcher

    return compile_ if fn is None else compile_(fn)


def renamed_copy(fn, suffix: str, overrides: dict | None = None):
    """A copy of the Python function behind ``fn`` (a dispatcher or a plain function) named
    ``<name>_<suffix>``, its globals updated with ``overrides`` (names it calls, swapped).

    Numba's on-disk cache is keyed by the qualified name and source file, not by the compile
    options or the globals, so a second build of one function must carry its own name or the two
    builds load each other's machine code (measured: the wrong build ran, or segfaulted).
    """
    import types

    fn = getattr(fn, "py_func", fn)  # a plain function under NUMBA_DISABLE_JIT=1
    scope = fn.__globals__ if not overrides else {**fn.__globals__, **overrides}
    twin = types.FunctionType(fn.__code__, scope, f"{fn.__name__}_{suffix}", fn.__defaults__,
                              fn.__closure__)
    twin.__qualname__ = f"{fn.__qualname__}_{suffix}"
    twin.__module__ = fn.__module__
    twin.__doc__ = fn.__doc__
    twin.__kwdefaults__ = fn.__kwdefaults__
    return twin


def inlined(kernel):
    """A copy of ``kernel`` (same source) that numba inlines into its caller (kernel families:
    one compiled dispatcher instead of one compiled function per kernel)."""
    return jit(getattr(kernel, "py_func", kernel), inline="always")
