"""Import rules of the package, read from the source with ``ast`` (issue 12's layout):

- no import circle between nnjit's modules, counting imports inside functions too (a lazy import
  of another nnjit module that closes a circle still hides one; lazy imports of optional extras
  such as torch are not nnjit modules and do not count);
- nothing inside the package imports the package face (``import nnjit``, or ``from nnjit import
  X`` where X is a name of ``nnjit/__init__.py`` rather than a submodule): a module imports what
  it uses from where it is defined;
- ``nnjit/kernels`` imports nothing from nnjit outside ``kernels`` (pure compiled kernels at the
  bottom of the layers);
- ``nnjit/nn`` (layers) imports nothing from ``train``, ``export``, ``experiment`` or ``cli``, which
  build on it (they register what Module's convenience methods call in ``nnjit.nn.providers``);
- ``nnjit/io`` (file formats) imports only ``io``, ``checks`` and ``_version``: nothing above it;
- the packages (and top-level modules) of nnjit stand in one order, :data:`PACKAGE_ORDER`, and a
  module imports only from its own package and the ones below it (counting imports inside
  functions too), so no two packages import each other (data <-> engine, graph <-> ops, ...);
- no product file in ``nnjit/`` is longer than :data:`MAX_LINES` lines (issue 21: rooms with one
  job).

Each allowlist below holds today's known offenders, each entry with the issue (or the change) that
removes it. An entry that no longer occurs fails the test, so the lists only shrink.
"""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).parents[1] / "nnjit"

#: Imports (importer, imported) that still close a circle; the cycle test ignores them.
CIRCLE_ALLOWLIST: set[tuple[str, str]] = set()

#: kernels modules' imports from nnjit outside kernels (importer, imported).
KERNELS_ALLOWLIST: set[tuple[str, str]] = set()

#: nnjit's packages and top-level modules (``nnjit.X``), from the bottom up: a module imports only
#: from its own package and those before it here. The package face (``nnjit/__init__.py``) stands
#: above them all, and a new package must be placed here before its imports are checked.
PACKAGE_ORDER = (
    "_version", "checks", "dtypes", "random", "io",  # helpers importing nothing above them
    "kernels",  # pure compiled kernels
    "tape",  # tracing: symbolic tensors record ops into the arena layout
    "graph",  # graph inputs: the int64 array compiled code reads, sampled batches, edges
    "ops",  # op families: specs, recorders, dispatchers
    "engine",  # the compiled interpreter and the traced program that drives it
    "data",  # loaders, datasets, augmentation (which makes the engine's Augmentation run option)
    "nn",  # layers
    "losses", "regularizers", "optim", "schedulers",
    "distributed",  # MPI: its hooks of the engine's dispatch table and the MPI class a Trainer takes
    "train",  # Trainer, callbacks, checkpoints
    "export",  # safetensors and ONNX (checks forward as the Trainer does)
    "viz", "datasets",
    "experiment",  # configs, runs, sweeps
    "sklearn",
    "cli", "__main__",
)

#: Imports (importer, imported) from a package above the importer's in PACKAGE_ORDER.
UPWARD_ALLOWLIST: set[tuple[str, str]] = {
    # a Program keeps each input's InputSpec (row shape, integer or not); removed when InputSpec
    # moves below the engine
    ("nnjit.engine.program", "nnjit.data.inputs"),
    # GraphStructure builds its CSRs with data.graph's to_csr and replace_self_loops (lazily);
    # removed when those array helpers move into nnjit.graph
    ("nnjit.graph.edges", "nnjit.data.graph"),
    # Edges' methods record the graph family's ops, whose recorders are in ops.graph (which reads
    # graph_data and sampled_batch below it); removed when edges.py moves above ops
    ("nnjit.graph.edges", "nnjit.ops.graph"),
    # the compiled loader of sampled batches reads the engine's field table and row loaders
    # (which import only kernels and tape); removed when fields and batch_loading move below
    # graph, or sampled_batch into the engine
    ("nnjit.graph.sampled_batch", "nnjit.engine.batch_loading"),
    ("nnjit.graph.sampled_batch", "nnjit.engine.fields"),
    # the functional conv2d (re-exported by nn.functional) takes a Parameter as weight or bias, as
    # torch's does, and records it (a lazy import for the isinstance check); removed when that
    # entry point moves into nn.functional, leaving ops.conv the recorder it calls
    ("nnjit.ops.conv", "nnjit.nn.parameter"),
}

#: Lines a product file in nnjit/ may have at most (issue 21: rooms with one job).
MAX_LINES = 600

#: Product files (relative to the repository) longer than MAX_LINES today.
LONG_FILE_ALLOWLIST: set[str] = set()


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _face_names() -> set[str]:
    """Names bound in nnjit/__init__.py that are not submodules (the re-exported API)."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {n for n in names if f"nnjit.{n}" not in MODULES and n != "annotations"}


def _imports(module: str):
    """``(lineno, imported module, name or None)`` for every import of an nnjit module in
    ``module``, at any depth (in functions too). ``from pkg import x`` counts as importing
    ``pkg.x`` when that is a module, else ``pkg`` (with ``name`` x)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "nnjit":
                    yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            if base.split(".")[0] != "nnjit":
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield (node.lineno, full, None) if full in MODULES else (node.lineno, base,
                                                                          alias.name)


def _graph() -> dict[str, set[str]]:
    graph = {}
    for module in MODULES:
        targets = set()
        for _, name, _ in _imports(module):
            while name and name not in MODULES:  # an attribute path: its module
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
        graph[module] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_is_read():
    graph = _graph()
    assert "nnjit.experiment.config" in graph["nnjit.experiment.train_run"]
    assert "nnjit.kernels._jit" in graph["nnjit.kernels.dense"]
    assert len(graph) == len(MODULES) > 50


def test_no_import_circle_inside_the_package():
    graph = _graph()
    stale = sorted(e for e in CIRCLE_ALLOWLIST if e[1] not in graph.get(e[0], ()))
    assert not stale, f"these imports are gone: delete them from CIRCLE_ALLOWLIST: {stale}"
    for importer, imported in CIRCLE_ALLOWLIST:
        graph[importer] = graph[importer] - {imported}
    cycles = _cycles(graph)
    detail = [[f"{a} -> {b}" for a in c for b in sorted(graph[a] & set(c))] for c in cycles]
    assert not cycles, f"import circles: {detail}"


def test_the_circle_check_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_nothing_inside_the_package_imports_the_package_face():
    face = _face_names()
    assert {"Trainer", "Linear", "__version__"} <= face and "datasets" not in face
    offenders = []
    for module, path in MODULES.items():
        if module == "nnjit":
            continue
        for lineno, name, attr in _imports(module):
            if name == "nnjit" and (attr is None or attr in face):
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{lineno}")
    assert not offenders, f"import from the defining module instead of nnjit: {offenders}"


def test_kernels_import_nothing_above_them():
    graph = _graph()
    found = {(m, t) for m, targets in graph.items() if m.startswith("nnjit.kernels")
             for t in targets if not t.startswith("nnjit.kernels")}
    stale = sorted(KERNELS_ALLOWLIST - found)
    assert not stale, f"these imports are gone: delete them from KERNELS_ALLOWLIST: {stale}"
    above = sorted(found - KERNELS_ALLOWLIST)
    assert not above, f"kernels import from nnjit outside kernels: {above}"


#: The layers above nn: nn never imports them.
ABOVE_NN = ("nnjit.train", "nnjit.export", "nnjit.experiment", "nnjit.cli")
#: What nnjit/io may import from nnjit.
BELOW_IO = ("nnjit.io", "nnjit.checks", "nnjit._version")


def _in(module: str, packages) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_nn_imports_nothing_from_the_layers_that_build_on_it():
    graph = _graph()
    found = sorted((m, t) for m, targets in graph.items() if _in(m, ("nnjit.nn",))
                   for t in targets if _in(t, ABOVE_NN))
    assert not found, f"nn imports from a layer above it (register in nnjit.nn.providers): {found}"
    assert "nnjit.nn.providers" in graph["nnjit.nn.module"]  # (the rule reads nn's imports)


def test_io_imports_nothing_above_it():
    graph = _graph()
    assert "nnjit.io.atomic" in graph["nnjit.io.nne"]  # (the rule reads io's imports)
    found = sorted((m, t) for m, targets in graph.items() if _in(m, ("nnjit.io",))
                   for t in targets if not _in(t, BELOW_IO))
    assert not found, f"io imports from a layer above it: {found}"


def _package(module: str) -> str | None:
    """The entry of PACKAGE_ORDER that ``module`` belongs to (None for the face, ``nnjit``)."""
    return module.split(".")[1] if "." in module else None


def _upward(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The imports (importer, imported) from a package above the importer's."""
    rank = {name: i for i, name in enumerate(PACKAGE_ORDER)}
    return {(m, t) for m, targets in graph.items() if _package(m) is not None
            for t in targets if _package(t) is not None
            and rank[_package(t)] > rank[_package(m)]}


def test_package_order_names_every_package_once():
    assert len(set(PACKAGE_ORDER)) == len(PACKAGE_ORDER)
    packages = {_package(m) for m in MODULES} - {None}
    assert packages == set(PACKAGE_ORDER), (
        f"place these in PACKAGE_ORDER: {sorted(packages - set(PACKAGE_ORDER))}; "
        f"gone: {sorted(set(PACKAGE_ORDER) - packages)}")


def test_no_package_imports_from_a_package_above_it():
    found = _upward(_graph())
    stale = sorted(UPWARD_ALLOWLIST - found)
    assert not stale, f"these imports are gone: delete them from UPWARD_ALLOWLIST: {stale}"
    above = sorted(found - UPWARD_ALLOWLIST)
    assert not above, (f"imports from a package above the importer's in PACKAGE_ORDER (move the "
                       f"code to the layer it belongs to): {above}")


def test_the_package_order_check_finds_a_back_and_forth():
    graph = {"nnjit.data.loader": {"nnjit.engine.fields", "nnjit.checks"},
             "nnjit.engine.fields": {"nnjit.data.loader", "nnjit.kernels.dense"},
             "nnjit.kernels.dense": set(), "nnjit.checks": set(), "nnjit": {"nnjit.cli.main"},
             "nnjit.cli.main": set()}
    assert _upward(graph) == {("nnjit.engine.fields", "nnjit.data.loader")}


def _line_count(path: pathlib.Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_product_file_is_longer_than_the_limit():
    long = {path.relative_to(PACKAGE.parent).as_posix(): _line_count(path)
            for path in MODULES.values() if _line_count(path) > MAX_LINES}
    stale = sorted(LONG_FILE_ALLOWLIST - set(long))
    assert not stale, (f"these files have at most {MAX_LINES} lines now (or are gone): delete "
                       f"them from LONG_FILE_ALLOWLIST: {stale}")
    over = {f: n for f, n in sorted(long.items()) if f not in LONG_FILE_ALLOWLIST}
    assert not over, f"files longer than {MAX_LINES} lines (give each job its own module): {over}"
