"""The recurrent scan's per-step product through ``W_hh``, with the weight packed once per scan.

A step multiplies the valid rows' state (n, K) by a fixed matrix (K, N): ``W_hh^T`` forward
(K = H, N = G) and ``W_hh`` backward (K = G, N = H). BLAS repacks that matrix at every call,
which for a few dozen rows costs as much as the product (LSTM H=128, 32 rows: ~65 GFLOP/s of a
100-145 peak). Here it is packed once per scan (:func:`pack`) into strips of one vector's width:
strip ``v`` holds columns ``v*L .. (v+1)*L`` (L the lanes) for every k, contiguous, so a tile
streams each strip front to back.

:func:`product`: ``out (n, N) = a (n, K) @ B`` starting from zeros, a bias row or ``out``
itself. A tile of 4 rows by 4 strips is 16 vector accumulators; per k, 4 vector loads and 4
broadcasts feed 16 FMAs. No blocking along K: the panel of 4 strips (K * 256 bytes) streams
from L2 at a quarter of a vector per FMA, which L2 sustains (measured: blocking K to fit L1 was
slower at every block size tried, 8-64 KiB; 4x4 tiles against 8x3 ones: as fast where both fit,
and the LSTM's 8 strips and the GRU's 4 have no edge waste). Edge rows and strips repeat the
last one (computed twice, stored twice), as in
:mod:`nnjit.kernels.dense_vector`. N must be a multiple of the lanes (:func:`fits`).

:func:`weight_product`: a weight's gradient ``x^T dy`` (I, O) over R rows runs the same tiles
with A = x^T (its (i, k) at ``x[k, i]``) and B = dy read in place (a row of dy holds the k-th
vector of every strip), K = R in chunks whose rows of x and dy stay in L2.

Compile time: LLVM inlined the tile loop into every function that called it, directly or
through :func:`product`, and optimised it again there (~1 s each): :func:`_call_tiles` calls it
with ``noinline``.
"""

from numba import types
from numba.extending import intrinsic

from nnjit.kernels import simd
from nnjit.kernels._jit import jit

ZEROS, BIAS, ADD = 0, 1, 2


@jit
def fits(buf, cols):
    """Whether a product with ``cols`` output columns can run packed (a multiple of the lanes
    of ``buf``'s dtype)."""
    return cols % simd.lanes(buf) == 0


@jit
def pack(w, transpose, packed):
    """packed (K*N,) = B in strips (module doc), B = ``w.T`` (w (N, K)) when ``transpose``,
    else ``w`` (K, N)."""
    lanes = simd.lanes(packed)
    cols = w.shape[0] if transpose else w.shape[1]
    inner = w.size // cols
    at = 0
    for v in range(cols // lanes):
        for k in range(inner):
            for lane in range(lanes):
                c = v * lanes + lane
                packed[at] = w[c, k] if transpose else w[k, c]
                at += 1


@jit
def product(a, packed, out, start, bias):
    """out (n, N) = a (n, K) @ B plus, by ``start``, nothing (ZEROS), ``bias`` (N,) (BIAS) or
    out (ADD); B packed by :func:`pack`; a and out C-contiguous (module doc)."""
    rows, inner = a.shape
    cols = out.shape[1]
    if rows == 0:
        return
    lanes = simd.lanes(packed)
    af, of = a.reshape(rows * inner), out.reshape(rows * cols)
    # (the tiles take strides: A's rows and steps, B's strips and steps)
    _call_tiles(af, inner, 1, packed, inner * lanes, lanes, of, bias, rows, cols, 0, inner, start)


@jit
def weight_product(x, dy, out_t, accumulate, chunk):
    """out_t (I, O) (+)= x (R, I).T @ dy (R, O), dy read in place as B (its rows the k, its
    vectors the strips: O a multiple of the lanes), over ``chunk`` rows of R at a time."""
    rows, inner = x.shape
    cols = dy.shape[1]
    if rows == 0:
        if not accumulate:
            out_t[:, :] = 0
        return
    xf, df, of = x.reshape(rows * inner), dy.reshape(rows * cols), out_t.reshape(inner * cols)
    lanes = simd.lanes(of)
    for k0 in range(0, rows, chunk):
        _call_tiles(xf, 1, inner, df, lanes, cols, of, of, inner, cols, k0,
                    min(k0 + chunk, rows), ADD if accumulate or k0 > 0 else ZEROS)


@intrinsic
def _call_tiles(typingctx, af, a_row, a_step, bf, b_strip, b_step, of, bias, rows, cols, k0, k1,
                first):
    """:func:`_tiles` (same arguments), called with LLVM's ``noinline`` on the call: every
    function that inlined the tile loop optimised it again (~1 s of compile time each, the scan's
    forward and backward and the family's dispatchers), numba has no ``noinline`` of its own,
    and one call per step costs nothing next to the loop."""
    sig = types.none(af, a_row, a_step, bf, b_strip, b_step, of, bias, rows, cols, k0, k1, first)

    def codegen(context, builder, signature, args):
        fnty = context.typing_context.resolve_value_type(_tiles)
        call = fnty.get_call_type(context.typing_context, signature.args, {})
        block, before = builder.block, len(builder.block.instructions)
        context.get_function(fnty, call)(builder, args)
        for instr in block.instructions[before:]:
            if getattr(getattr(instr, "callee", None), "name", "").find("_tiles") >= 0:
                instr.attributes.add("noinline")
        return context.get_dummy_value()

    return sig, codegen


@jit
def _tiles(af, a_row, a_step, bf, b_strip, b_step, of, bias, rows, cols, k0, k1, first):
    """out (rows, cols) (+)= A @ B over k in [k0, k1): A's (i, k) at ``af[i*a_row + k*a_step]``,
    B's vector (k, v) at ``bf[v*b_strip + k*b_step]``; tiles of 4 rows by 4 strips, the last
    row and strip repeated past the edge (module doc)."""
    lanes = simd.lanes(of)
    last, lastv = rows - 1, cols // lanes - 1
    ka0, kb0 = k0 * a_step, k0 * b_step
    for s0 in range(0, lastv + 1, 4):
        v1, v2, v3 = min(s0 + 1, lastv), min(s0 + 2, lastv), min(s0 + 3, lastv)
        c0, c1, c2, c3 = s0 * lanes, v1 * lanes, v2 * lanes, v3 * lanes
        t0, t1 = s0 * b_strip + kb0, v1 * b_strip + kb0
        t2, t3 = v2 * b_strip + kb0, v3 * b_strip + kb0
        for r0 in range(0, rows, 4):
            r1, r2, r3 = min(r0 + 1, last), min(r0 + 2, last), min(r0 + 3, last)
            q0, q1, q2, q3 = r0 * cols, r1 * cols, r2 * cols, r3 * cols
            e0, e1, e2, e3 = r0 * a_row + ka0, r1 * a_row + ka0, r2 * a_row + ka0, r3 * a_row + ka0
            a00, a01, a02, a03 = _start(of, bias, q0, c0, c1, c2, c3, first)
            a10, a11, a12, a13 = _start(of, bias, q1, c0, c1, c2, c3, first)
            a20, a21, a22, a23 = _start(of, bias, q2, c0, c1, c2, c3, first)
            a30, a31, a32, a33 = _start(of, bias, q3, c0, c1, c2, c3, first)
            for k in range(k1 - k0):
                ka, kb = k * a_step, k * b_step
                b0 = simd.load(bf, t0 + kb)
                b1 = simd.load(bf, t1 + kb)
                b2 = simd.load(bf, t2 + kb)
                b3 = simd.load(bf, t3 + kb)
                s = simd.splat(af, e0 + ka)
                a00 = simd.fma(s, b0, a00)
                a01 = simd.fma(s, b1, a01)
                a02 = simd.fma(s, b2, a02)
                a03 = simd.fma(s, b3, a03)
                s = simd.splat(af, e1 + ka)
                a10 = simd.fma(s, b0, a10)
                a11 = simd.fma(s, b1, a11)
                a12 = simd.fma(s, b2, a12)
                a13 = simd.fma(s, b3, a13)
                s = simd.splat(af, e2 + ka)
                a20 = simd.fma(s, b0, a20)
                a21 = simd.fma(s, b1, a21)
                a22 = simd.fma(s, b2, a22)
                a23 = simd.fma(s, b3, a23)
                s = simd.splat(af, e3 + ka)
                a30 = simd.fma(s, b0, a30)
                a31 = simd.fma(s, b1, a31)
                a32 = simd.fma(s, b2, a32)
                a33 = simd.fma(s, b3, a33)
            # (repeated edge rows and strips store the same values twice; the last first)
            _store(of, q3, c0, c1, c2, c3, a30, a31, a32, a33)
            _store(of, q2, c0, c1, c2, c3, a20, a21, a22, a23)
            _store(of, q1, c0, c1, c2, c3, a10, a11, a12, a13)
            _store(of, q0, c0, c1, c2, c3, a00, a01, a02, a03)


@jit
def _start(of, bias, row, c0, c1, c2, c3, first):
    """A row's 4 accumulators: zeros, the bias's vectors or out's."""
    if first == ADD:
        return (simd.load(of, row + c0), simd.load(of, row + c1), simd.load(of, row + c2),
                simd.load(of, row + c3))
    if first == BIAS:
        return simd.load(bias, c0), simd.load(bias, c1), simd.load(bias, c2), simd.load(bias, c3)
    z = simd.zeros(of)
    return z, z, z, z


@jit
def _store(of, row, c0, c1, c2, c3, d0, d1, d2, d3):
    """Store a row's 4 vectors, the last first."""
    simd.store(of, row + c3, d3)
    simd.store(of, row + c2, d2)
    simd.store(of, row + c1, d1)
    simd.store(of, row + c0, d0)
