"""Neighbour-sampled GNN training on a large synthetic graph: throughput and bounded memory.

Run from the repository root::

    python -m benchmarks.gnn_sampled            # 200,000 nodes, 2,000,000 edges (~2 minutes)
    python -m benchmarks.gnn_sampled --quick    # tiny graph, 1 repeat, no PyG (smoke test)

Workload: a random graph (edges drawn uniformly, stored in both directions), 64 dense float32
features whose class signal is planted in the features of a node and its neighbours, 10 classes,
10% of the nodes as training seeds; GraphSAGE (mean) 64 -> 64 -> 10, Adam 0.01, neighbour
sampling with fan-outs [10, 10] and 512 seeds per batch (PyG's ``NeighborLoader`` settings).

- **nnjit**: ``trainer.fit(NeighborLoader(graph, [10, 10], 512), epochs=1)``: sampling, feature
  gathering, forward, backward and Adam all in compiled code; seeds per second = training seeds /
  epoch time (median of the repeats, the compile excluded by a warm-up fit).
- **PyTorch Geometric** (if installed): PyG's own ``NeighborLoader`` needs ``pyg-lib`` or
  ``torch-sparse``, which have no wheels on this machine's package index; when neither imports,
  the PyG side trains ``torch_geometric.nn.SAGEConv`` (1 thread) on the *same* subgraphs, sampled
  beforehand by nnjit's sampler and converted to tensors outside the timed loop, so its time
  covers the model work only (sampling excluded: a lower bound of PyG's epoch).
- **Memory**: nnjit's arena (values + gradients) against the graph's own arrays, for this graph
  and one half its size with the same batch settings: the arena minus the node features must
  not grow with the graph (it is sized by the sample buffers).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks._common import (
    alternate,
    environment_info,
    finish,
    fmt_num,
    fmt_ratio,
    fmt_time,
    import_torch_single_thread,
    load_warning,
    loadavg,
    out_path,
    package_versions,
    print_table,
    ratio,
    summarize,
)

FANOUTS = [10, 10]
BATCH = 512
HIDDEN = 64
FEATURES = 64
CLASSES = 10
LR = 0.01


def make_graph(nn, n_nodes: int, n_edges: int, seed: int = 0):
    """A random graph with a planted class signal (see the module doc)."""
    rng = np.random.default_rng(seed)
    half = n_edges // 2
    src = rng.integers(0, n_nodes, half)
    dst = rng.integers(0, n_nodes, half)
    edge_index = np.concatenate([np.stack([src, dst]), np.stack([dst, src])], axis=1)
    y = rng.integers(0, CLASSES, n_nodes)
    centers = rng.normal(size=(CLASSES, FEATURES)).astype(np.float32)
    x = (centers[y] * 0.5 + rng.normal(size=(n_nodes, FEATURES))).astype(np.float32)
    train = np.zeros(n_nodes, bool)
    train[rng.permutation(n_nodes)[: n_nodes // 10]] = True
    return nn.Graph.from_arrays(x, edge_index, y, train_mask=train)


def nnjit_model(nn):
    from nnjit.nn import functional as F

    class SAGE(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.SAGEConv(FEATURES, HIDDEN)
            self.conv2 = nn.SAGEConv(HIDDEN, CLASSES)

        def forward(self, x, edges):
            return self.conv2(F.relu(self.conv1(x, edges)), edges)

    return SAGE()


def presample(graph, n_batches: int, seed: int = 0):
    """Subgraphs drawn by nnjit's compiled sampler, as PyG tensors (seeds first)."""
    from nnjit.data.graph import to_csr
    from nnjit.kernels.rng import seed_state
    from nnjit.kernels.sampling import max_sizes, sample_subgraph

    indptr, src, _ = to_csr(graph.edge_index, graph.num_nodes)
    max_nodes, max_edges = max_sizes(BATCH, FANOUTS, False, graph.num_nodes, len(src))
    node_ids = np.empty(max_nodes, np.int64)
    local_of = np.full(graph.num_nodes, -1, np.int64)
    out_indptr = np.empty(max_nodes + 1, np.int64)
    out_src = np.empty(max_edges, np.int64)
    rng = seed_state(seed)
    seeds_all = np.flatnonzero(graph.train_mask)
    order = np.random.default_rng(seed).permutation(seeds_all)
    batches = []
    for b in range(n_batches):
        seeds = np.ascontiguousarray(order[b * BATCH : (b + 1) * BATCH])
        n, e = sample_subgraph(indptr, src, seeds, np.array(FANOUTS, np.int64), rng, node_ids,
                               local_of, out_indptr, out_src, False)
        targets = np.repeat(np.arange(n), np.diff(out_indptr[: n + 1]))
        batches.append((node_ids[:n].copy(), np.stack([out_src[:e].copy(), targets]), len(seeds)))
    return batches


def run_pyg(torch, graph, batches, repeats: int):
    from torch_geometric.nn import SAGEConv

    class SAGE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = SAGEConv(FEATURES, HIDDEN)
            self.conv2 = SAGEConv(HIDDEN, CLASSES)

        def forward(self, x, edge_index):
            return self.conv2(self.conv1(x, edge_index).relu(), edge_index)

    torch.manual_seed(0)
    model = SAGE()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    x_all = torch.from_numpy(graph.x)
    y_all = torch.from_numpy(graph.y)
    prepared = [(torch.from_numpy(ids), torch.from_numpy(ei), b) for ids, ei, b in batches]

    def epoch(_):
        t0 = time.perf_counter()
        seeds = 0
        for ids, ei, b in prepared:
            opt.zero_grad()
            out = model(x_all[ids], ei)[:b]
            loss = torch.nn.functional.cross_entropy(out, y_all[ids[:b]])
            loss.backward()
            opt.step()
            seeds += b
        return {"seconds": time.perf_counter() - t0, "seeds": seeds}

    epoch(0)  # warm-up
    return [epoch(r) for r in range(repeats)]


def arena_bytes(trainer) -> int:
    p = trainer.program
    return int(p.values.nbytes + p.grads.nbytes)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gnn_sampled", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="tiny graph, 1 repeat, no PyG (smoke test)")
    p.add_argument("--nodes", type=int, default=None, help="nodes (default 200,000)")
    p.add_argument("--edges", type=int, default=None, help="edges (default 2,000,000)")
    p.add_argument("--repeats", type=int, default=None, help="timed epochs (default 5)")
    p.add_argument("--out", default="gnn_sampled", help="results name, .json path or directory")
    args = p.parse_args(argv)
    t_start = time.perf_counter()
    n_nodes = args.nodes or (4_000 if args.quick else 200_000)
    n_edges = args.edges or (40_000 if args.quick else 2_000_000)
    repeats = args.repeats or (1 if args.quick else 5)

    import nnjit as nn

    env = environment_info(loadavg_before=loadavg(),
                           versions=package_versions("torch", "torch_geometric", "pyg-lib",
                                                     "torch-sparse"))
    t0 = time.perf_counter()
    graph = make_graph(nn, n_nodes, n_edges)
    build_s = time.perf_counter() - t0
    n_seeds = int(graph.train_mask.sum())
    loader = nn.NeighborLoader(graph, FANOUTS, batch_size=BATCH)

    nn.set_seed(0)
    trainer = nn.Trainer(nnjit_model(nn), nn.Adam(lr=LR), seed=0)
    t0 = time.perf_counter()
    trainer.fit(loader, epochs=1, verbose=0, n_iter_no_change=None)  # compile or load + 1 epoch
    first_fit_s = time.perf_counter() - t0

    def nnjit_epoch(_):
        h = trainer.fit(loader, epochs=1, verbose=0, n_iter_no_change=None)
        return {"seconds": float(h["seconds"].iloc[0]), "seeds": n_seeds,
                "train_loss": float(h["train_loss"].iloc[0])}

    contenders = {"nnjit": nnjit_epoch}
    skipped = {}
    # --quick smoke-tests nnjit's side: importing PyG alone costs ~5 s of CPU
    torch, why = (None, "skipped: --quick") if args.quick else import_torch_single_thread()
    pyg_results = None
    if torch is None:
        skipped["PyG"] = why
    else:
        try:
            import torch_geometric  # noqa: F401
        except ImportError as e:
            skipped["PyG"] = f"skipped: torch_geometric not installed ({e})"
    results = alternate(contenders, repeats)
    if "PyG" not in skipped:
        batches = presample(graph, -(-n_seeds // BATCH))
        pyg_results = run_pyg(torch, graph, batches, repeats)
        results["PyG (model only, nnjit's samples)"] = pyg_results

    # memory: the same batch settings on a graph half the size (the buffers fit both)
    small = make_graph(nn, max(n_nodes // 2, 1000), max(n_edges // 2, 10_000), seed=1)
    small_trainer = nn.Trainer(nnjit_model(nn), nn.Adam(lr=LR), seed=0)
    small_trainer.fit(nn.NeighborLoader(small, FANOUTS, batch_size=BATCH), epochs=1, verbose=0,
                      n_iter_no_change=None)
    feature_bytes = {"big": graph.x.size * np.dtype(np.float32).itemsize,
                     "small": small.x.size * np.dtype(np.float32).itemsize}
    memory = {
        "arena_bytes": {"big": arena_bytes(trainer), "small": arena_bytes(small_trainer)},
        "feature_bytes": feature_bytes,
        "graph_bytes": {"big": graph.x.nbytes + graph.edge_index.nbytes,
                        "small": small.x.nbytes + small.edge_index.nbytes},
    }
    # the values arena holds the features once (a constant: no gradient space)
    memory["arena_minus_features"] = {k: memory["arena_bytes"][k] - feature_bytes[k]
                                      for k in ("big", "small")}

    summary = {}
    for name, runs in results.items():
        secs = summarize([r["seconds"] for r in runs])
        summary[name] = {"epoch_s": secs, "seeds": runs[0]["seeds"],
                         "seeds_per_s": runs[0]["seeds"] / secs["median"]}
    pyg_name = "PyG (model only, nnjit's samples)"
    res = {
        "benchmark": "gnn_sampled",
        "config": {"nodes": n_nodes, "edges": int(graph.num_edges), "features": FEATURES,
                   "classes": CLASSES, "train_seeds": n_seeds, "fanouts": FANOUTS,
                   "batch": BATCH, "hidden": HIDDEN, "repeats": repeats, "quick": args.quick},
        "graph_build_s": build_s,
        "nnjit_first_fit_s": first_fit_s,
        "raw": results,
        "summary": summary,
        "speedup_vs_pyg": ratio(summary.get(pyg_name, {}).get("epoch_s", {}).get("median"),
                                summary["nnjit"]["epoch_s"]["median"]),
        "memory": memory,
        "skipped": skipped,
        "environment": env,
    }
    env["loadavg_after"] = loadavg()
    res["benchmark_wall_s"] = time.perf_counter() - t_start

    def warnings(r):
        out = [w for w in [load_warning(env)] if w]
        if "PyG" not in skipped:
            out.append("PyG's NeighborLoader needs pyg-lib or torch-sparse (not installable "
                       "here): the PyG time covers the model on nnjit's samples, sampling "
                       "excluded")
        return out

    def report(r):
        rows = [[name, *[fmt_time(s["epoch_s"][k]) for k in ("median", "min", "max")],
                 fmt_num(round(s["seeds_per_s"]))] for name, s in r["summary"].items()]
        print_table(["contender", "epoch median", "min", "max", "seeds / s"], rows,
                    title=f"Sampled SAGE training, {n_nodes:,} nodes, {graph.num_edges:,} edges, "
                          f"{n_seeds:,} seeds, fan-outs {FANOUTS}, batch {BATCH}")
        if r["speedup_vs_pyg"] is not None:
            print(f"nnjit vs PyG (model only): {fmt_ratio(r['speedup_vs_pyg'])}")
        m = r["memory"]
        print_table(["graph", "nodes", "graph arrays", "arena", "arena minus features"],
                    [[k, fmt_num(n_nodes if k == "big" else small.num_nodes),
                      f"{m['graph_bytes'][k] / 2**20:.1f} MiB",
                      f"{m['arena_bytes'][k] / 2**20:.1f} MiB",
                      f"{m['arena_minus_features'][k] / 2**20:.2f} MiB"]
                     for k in ("big", "small")], title="Memory (bounded by the sample buffers)")
        for name, why in r["skipped"].items():
            print(f"{name}: {why}")
        for w in r["warnings"]:
            print(f"warning: {w}")
        print(f"benchmark wall time {fmt_time(r['benchmark_wall_s'])}")

    return finish(res, out_path(args.out, "gnn_sampled"), warnings, report)


if __name__ == "__main__":
    main()
