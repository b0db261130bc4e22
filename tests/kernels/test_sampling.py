"""Tests for nnjit.kernels.sampling: structure of the sampled subgraph, bounds, seeding, allocations."""

from __future__ import annotations

from collections import Counter

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nnjit.kernels import rng as krng
from nnjit.kernels import sampling as S
from nnjit.kernels._jit import jit
from tests.helpers import count_allocations
from tests.kernels.graph_reference import csr_from_edges

needs_jit = pytest.mark.skipif(numba.config.DISABLE_JIT, reason="counts NRT allocations")


class Case:
    """A full graph (CSR by target), seeds, fan-outs, and buffers laid out by max_sizes."""

    def __init__(self, n, srcs, dsts, seeds, fanouts, loops, seed, tight=True):
        self.n = n
        self.indptr, self.src, _ = csr_from_edges(srcs, dsts, n)
        self.edges = Counter(zip(srcs, dsts))
        self.seeds = np.asarray(seeds, np.int64)
        self.fanouts = np.asarray(fanouts, np.int64)
        self.loops = loops
        self.state = krng.seed_state(seed)
        graph = {"num_nodes": n, "num_edges": len(srcs)} if tight else {}
        self.max_nodes, self.max_edges = S.max_sizes(len(seeds), fanouts, loops, **graph)
        self.node_ids = np.full(self.max_nodes, -7, np.int64)
        self.local_of = np.full(n, -1, np.int64)
        self.out_indptr = np.full(self.max_nodes + 1, -7, np.int64)
        self.out_src = np.full(self.max_edges, -7, np.int64)

    def run(self, state=None):
        return S.sample_subgraph(self.indptr, self.src, self.seeds, self.fanouts,
                                 self.state if state is None else state, self.node_ids,
                                 self.local_of, self.out_indptr, self.out_src, self.loops)


@st.composite
def cases(draw):
    n = draw(st.integers(1, 25))
    e = draw(st.integers(0, 90))
    srcs = draw(st.lists(st.integers(0, n - 1), min_size=e, max_size=e))
    dsts = draw(st.lists(st.integers(0, n - 1), min_size=e, max_size=e))
    b = draw(st.integers(0, min(n, 6)))
    seeds = draw(st.permutations(range(n)))[:b]
    fanouts = draw(st.lists(st.sampled_from([-1, 0, 1, 2, 3, 5]), min_size=1, max_size=3))
    loops = draw(st.booleans())
    tight = -1 in fanouts or draw(st.booleans())
    return Case(n, srcs, dsts, seeds, fanouts, loops, draw(st.integers(0, 2**63 - 1)), tight)


def hops_of(c, n_nodes):
    """Hop of every local node, recomputed from the CSR; also checks the discovery order."""
    hop = np.full(n_nodes, -1)
    hop[:len(c.seeds)] = 0
    next_new = len(c.seeds)
    for t in range(n_nodes):
        assert hop[t] >= 0, f"node {t} is a target before it was reached"
        for s in c.out_src[c.out_indptr[t]:c.out_indptr[t + 1]]:
            if hop[s] < 0:
                assert s == next_new, "new nodes must get local ids in order of discovery"
                hop[s] = hop[t] + 1
                next_new += 1
    assert next_new == n_nodes
    return hop


@settings(max_examples=60, deadline=None)
@given(cases())
def test_sampled_subgraph_structure(c):
    n_nodes, n_edges = c.run()
    b = len(c.seeds)
    assert b <= n_nodes <= c.max_nodes and 0 <= n_edges <= c.max_edges
    assert (c.local_of == -1).all(), "local_of must be restored to -1"
    ids = c.node_ids[:n_nodes]
    np.testing.assert_array_equal(ids[:b], c.seeds)
    assert len(set(ids.tolist())) == n_nodes and ((0 <= ids) & (ids < c.n)).all()
    indptr = c.out_indptr[:n_nodes + 1]
    assert indptr[0] == 0 and indptr[-1] == n_edges and (np.diff(indptr) >= 0).all()
    out_src = c.out_src[:n_edges]
    assert ((0 <= out_src) & (out_src < n_nodes)).all()

    hop = hops_of(c, n_nodes)
    n_hops = len(c.fanouts)
    assert hop.max(initial=0) <= n_hops
    sampled = Counter()
    for t in range(n_nodes):
        seg = out_src[indptr[t]:indptr[t + 1]].tolist()
        if c.loops:
            assert seg[:1] == [t], "each segment starts with its self loop"
            seg = seg[1:]
            assert t not in seg, "the graph's own self loops are not sampled on top"
        g = int(ids[t])
        for s in seg:
            sampled[(int(ids[s]), g)] += 1
        deg = int(c.indptr[g + 1] - c.indptr[g])
        if hop[t] == n_hops:
            assert seg == [], "nodes of the last hop have no incoming edges"
            continue
        fan = int(c.fanouts[hop[t]])
        want = deg if fan < 0 else min(deg, fan)
        if c.loops:
            assert want - c.edges[(g, g)] <= len(seg) <= want
        else:
            assert len(seg) == want
    for edge, count in sampled.items():        # without replacement: within the multiplicity
        assert count <= c.edges[edge], f"edge {edge} sampled {count} times, exists {c.edges[edge]}"


@settings(max_examples=30, deadline=None)
@given(cases())
def test_same_state_same_sample(c):
    state = c.state.copy()
    first = c.run(state.copy())
    nodes, out_indptr, out_src = c.node_ids.copy(), c.out_indptr.copy(), c.out_src.copy()
    after = state.copy()
    again = c.run(after)
    assert first == again
    n_nodes, n_edges = first
    np.testing.assert_array_equal(c.node_ids[:n_nodes], nodes[:n_nodes])
    np.testing.assert_array_equal(c.out_indptr[:n_nodes + 1], out_indptr[:n_nodes + 1])
    np.testing.assert_array_equal(c.out_src[:n_edges], out_src[:n_edges])


def test_state_advances_and_samples_differ():
    rng = np.random.default_rng(0)
    n = 200
    c = Case(n, rng.integers(0, n, 4000).tolist(), rng.integers(0, n, 4000).tolist(),
             list(range(10)), [3, 2], False, 5)
    samples = set()
    for _ in range(5):
        _, n_edges = c.run()
        samples.add(tuple(c.out_src[:n_edges].tolist()))
    assert len(samples) == 5


def test_inclusion_probability_is_uniform():
    """Node 0 has 5 in-neighbours; fan-out 2 includes each with probability 2/5."""
    c = Case(6, [1, 2, 3, 4, 5], [0, 0, 0, 0, 0], [0], [2], False, 11)
    counts = Counter()
    trials = 5000
    for _ in range(trials):
        n_nodes, n_edges = c.run()
        assert n_edges == 2
        counts.update(c.node_ids[1:n_nodes].tolist())
    for node in range(1, 6):
        assert abs(counts[node] / trials - 0.4) < 0.03, counts


def test_bad_seeds_and_small_buffers_report_and_restore():
    c = Case(4, [1, 2, 3], [0, 0, 0], [0, 1], [-1], True, 0)
    c.seeds = np.array([0, 0], np.int64)
    assert c.run() == (S.BAD_SEEDS, S.BAD_SEEDS)
    assert (c.local_of == -1).all()
    c.seeds = np.array([0, 4], np.int64)
    assert c.run() == (S.BAD_SEEDS, S.BAD_SEEDS)
    c.seeds = np.array([0, 1], np.int64)
    assert c.run() == (4, 3 + 4)
    for name in ("node_ids", "out_src"):
        small = Case(4, [1, 2, 3], [0, 0, 0], [0, 1], [-1], True, 0)
        setattr(small, name, getattr(small, name)[:-1])
        assert small.run() == (S.BUFFER_TOO_SMALL, S.BUFFER_TOO_SMALL)
        assert (small.local_of == -1).all()


def test_max_sizes():
    assert S.max_sizes(4, [3, 2], False) == (4 + 12 + 24, 12 + 24)
    assert S.max_sizes(4, [3, 2], True) == (40, 36 + 40)
    assert S.max_sizes(4, [3, 2], False, num_nodes=10, num_edges=20) == (10, 20)
    assert S.max_sizes(2, [-1], True, num_nodes=10, num_edges=20) == (10, 30)
    assert S.max_sizes(0, [5], False) == (0, 0)
    with pytest.raises(ValueError, match="num_nodes and num_edges"):
        S.max_sizes(4, [-1, 2], False)
    with pytest.raises(ValueError, match="fan-out"):
        S.max_sizes(4, [-2], False)


@jit
def _sample_many(k, indptr, src, seeds, fanouts, state, node_ids, local_of, out_indptr, out_src):
    total = 0
    for _ in range(k):
        _, n_edges = S.sample_subgraph(indptr, src, seeds, fanouts, state, node_ids,
                                       local_of, out_indptr, out_src, True)
        total += n_edges
    return total


@needs_jit
def test_no_allocations():
    rng = np.random.default_rng(1)
    n = 500
    c = Case(n, rng.integers(0, n, 5000).tolist(), rng.integers(0, n, 5000).tolist(),
             rng.choice(n, 32, replace=False).tolist(), [10, 5], True, 3)
    args = (c.indptr, c.src, c.seeds, c.fanouts, c.state, c.node_ids, c.local_of, c.out_indptr,
            c.out_src)
    assert _sample_many(1, *args) > 0
    counts = count_allocations(lambda k: _sample_many(k, *args))
    assert counts[0] == counts[1], counts
    from numba.core.runtime import _nrt_python, rtsys
    _nrt_python.memsys_enable_stats()
    try:
        c.run()
        before = rtsys.get_allocation_stats()
        for _ in range(20):
            c.run()
        after = rtsys.get_allocation_stats()
    finally:
        _nrt_python.memsys_disable_stats()
    # calls from Python box their arguments (alloc and free in pairs): nothing is left behind
    assert after.alloc - before.alloc == after.free - before.free


def test_add_self_loops_equals_replace_self_loops():
    """The compiled per-subgraph A + I has, per target, the same sources as the NumPy one for a
    whole graph (one loop per node, the graph's own loops dropped); the loop comes first."""
    from nnjit.data.graph import replace_self_loops, to_csr
    from nnjit.kernels.sampling import add_self_loops

    rng = np.random.default_rng(0)
    n = 9
    edge_index = rng.integers(0, n, (2, 30))  # has self loops and duplicates
    indptr, src, _ = to_csr(edge_index, n)
    out_indptr = np.empty(n + 1, np.int64)
    out_src = np.empty(len(src) + n, np.int64)
    e = add_self_loops(indptr, src, n, out_indptr, out_src)
    ref_indptr, ref_src, _ = to_csr(replace_self_loops(edge_index, n), n)
    assert e == len(ref_src)
    for i in range(n):
        got = out_src[out_indptr[i]:out_indptr[i + 1]]
        assert got[0] == i
        assert sorted(got) == sorted(ref_src[ref_indptr[i]:ref_indptr[i + 1]])
