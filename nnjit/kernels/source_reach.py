"""Which source files a compiled function's code reaches, and a digest of their contents.

numba caches a function's machine code under the stamp of its own file only: a function that
calls kernels of another file keeps their old code after that file is edited (an editable
install, ``git pull``), and one that reads another file's constants (``from fields import
ST_EPOCH``: numba freezes the value into the machine code) keeps the old values.
:func:`reach_digest` names everything the code can reach, so a cache entry made with other
sources is not used.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import sys
import types

# Code these packages hold is versioned by the installation, not edited with a model.
_NOT_FOLLOWED = ("numba", "numpy", "llvmlite", "scipy")


def _followed(module_name: str | None) -> bool:
    top = (module_name or "").partition(".")[0]
    return bool(top) and top not in _NOT_FOLLOWED and top not in sys.stdlib_module_names


_FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+([\w.]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)",
                          re.MULTILINE)
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([\w., \t]+)", re.MULTILINE)


@functools.cache
def _imported(path: str) -> tuple[str, ...]:
    """The modules the file at ``path`` imports by absolute name (``import a.b``, ``from a.b
    import c``: ``a.b`` and ``a.b.c``, which may be a submodule). A scan of the lines, not a
    parse: it runs for every file a cached function reaches, in every process that loads one."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return ()
    names = []
    for module, imported in _FROM_IMPORT.findall(text):
        names.append(module)
        for part in imported.strip("()").split(","):
            name = part.split("#")[0].split(" as ")[0].strip()
            if name.isidentifier():
                names.append(f"{module}.{name}")
    for listed in _IMPORT.findall(text):
        names.extend(part.split(" as ")[0].strip() for part in listed.split(","))
    return tuple(names)


def _import_closure(paths: set[str]) -> set[str]:
    """``paths`` and the files of the (followed, loaded) modules they import, transitively: a
    global the code reads may be a constant defined in any of them (numba compiles its value
    in), and nothing tells an int's module."""
    out, todo = set(paths), list(paths)
    while todo:
        for name in _imported(todo.pop()):
            module = sys.modules.get(name)
            path = getattr(module, "__file__", None) if module is not None else None
            if path and _followed(name) and path not in out:
                out.add(path)
                todo.append(path)
    return out


def source_files(*functions) -> list[str]:
    """Sorted source files of ``functions`` and, transitively, of every function, numba
    dispatcher or module their code names (globals, and attributes of modules the code reaches
    through them: ``pkg.kernels.f`` and re-exports such as ``from pkg import kernels as K``),
    with the files those files import (their constants)."""
    files: set[str] = set()
    seen: set[tuple[int, frozenset]] = set()
    todo = [(f, frozenset()) for f in functions if f is not None]
    while todo:
        obj, names = todo.pop()
        if (id(obj), names) in seen:
            continue
        seen.add((id(obj), names))
        if isinstance(obj, types.ModuleType):
            path = getattr(obj, "__file__", None)
            if path and _followed(obj.__name__):
                files.add(path)
                todo.extend((v, frozenset()) for v in vars(obj).values()
                            if getattr(v, "__module__", None) == obj.__name__
                            and (hasattr(v, "py_func") or isinstance(v, types.FunctionType)))
                # names the referencing code reads as attributes: submodules, re-exports
                todo.extend((getattr(obj, n), names) for n in names if hasattr(obj, n))
            continue
        fn = getattr(obj, "py_func", obj)  # a numba dispatcher's Python function
        if not isinstance(fn, types.FunctionType) or not _followed(fn.__module__):
            continue
        files.add(fn.__code__.co_filename)
        codes = [fn.__code__]
        used: set[str] = set()
        while codes:
            code = codes.pop()
            used.update(code.co_names)
            codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        used_names = frozenset(used)
        for name in used_names:
            if name in fn.__globals__:
                value = fn.__globals__[name]
                todo.append((value, used_names if isinstance(value, types.ModuleType)
                             else frozenset()))
        for cell in fn.__closure__ or ():
            try:
                todo.append((cell.cell_contents, frozenset()))
            except ValueError:  # an empty cell
                pass
    return sorted(_import_closure(files))


@functools.cache
def _file_digest(path: str, stamp: tuple) -> bytes:
    # keyed by (mtime, size) too: a file edited while the process runs is read again
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).digest()


def reach_digest(*functions) -> str:
    """sha256 (hex) of the contents of every file :func:`source_files` finds for ``functions``,
    in an order independent of where the files are (a moved checkout keeps its cache)."""
    digests = []
    for path in source_files(*functions):
        st = os.stat(path)
        digests.append(_file_digest(path, (st.st_mtime_ns, st.st_size)))
    h = hashlib.sha256()
    for d in sorted(digests):
        h.update(d)
    return h.hexdigest()
