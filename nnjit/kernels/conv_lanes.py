"""Small stride-1 convolutions with the samples in the vector lanes (``ALGO_LANES``).

For layers with few channels (LeNet's 1 -> 6 and 6 -> 16) the other layouts waste most of a
tile: vectors along the channels are mostly padding, and vectors along an output row (the shifted
frames of :mod:`nnjit.kernels.conv_vector`) compute the ``KW - 1`` dropped columns of every row
(4 of 14 at 10x10) and round the rows up to the tile. Here a vector holds one value of ``lanes``
samples (16 float32): the images of a group of samples are transposed into frames
``(C, HP, WP, lanes)``, zero-padded, and every product is exact: the tap ``(c, r, s)`` of output
position ``(p, q)`` reads the whole vector at ``(c, p + r*DH, q + s*DW)``, so no lane, row or
column is computed and dropped. Tiles of 6 x 4 vectors (24 accumulators in registers):

* forward, 6 output channels x 4 output positions, over the taps: 4 loads and 6 broadcast
  weights per 24 FMAs;
* weight gradient, 6 output channels x 4 taps, over the positions of every group of samples:
  10 loads per 24 FMAs, the lanes summed once per call;
* input gradient, 6 taps x 4 output positions, over the output channels, each accumulator then
  added into the input gradient's frame at its tap's offset (the adjoint of im2col, with the
  column matrix never written).

The transposes between the sample-major arena and the lanes are blocks of ``lanes x lanes``
shuffled in registers (:func:`nnjit.kernels.simd.transpose`). A last group of fewer samples than
lanes runs with zero lanes.
"""

from nnjit.kernels import simd
from nnjit.kernels._jit import jit
from nnjit.kernels.int_views import int_view1d

#: a tile: rows (output channels; taps for the input gradient) x columns (positions; taps for
#: the weight gradient)
ROWS, COLS = 6, 4
#: lanes of the widest vector (float32): the scratch is sized for it
MAX_LANES = 16


def lanes_layout(cg, og, kh, kw, dh, dw, oh, ow, nv):
    """(frame height, frame width, elements of one group's frames, output positions rounded up to
    the tile, elements of the output gradient's lanes, elements of the weight gradient's
    vector sums) for ``nv`` lanes (module doc; the kernels compute the same inline)."""
    hp = oh + (kh - 1) * dh
    wp = ow + (kw - 1) * dw
    pqp = (oh * ow + COLS - 1) // COLS * COLS
    k = cg * kh * kw
    sums = (og + ROWS - 1) // ROWS * ROWS * ((k + COLS - 1) // COLS * COLS) * nv
    return hp, wp, cg * hp * wp * nv, pqp, og * pqp * nv, sums


def scratch_elements(cg, og, kh, kw, dh, dw, oh, ow):
    """Scratch elements the lanes kernels need (float32's lanes, the widest; one line more for
    the alignment): forward, the frames, the output's lanes; backward, the frames, the output
    gradient's lanes, the input gradient's frames, the weight gradient's sums and the
    transposed weight; both, a transpose block and the offset tables (:func:`offsets`)."""
    nv = MAX_LANES
    _, _, frames, _, grads, sums = lanes_layout(cg, og, kh, kw, dh, dw, oh, ow, nv)
    k = cg * kh * kw
    forward = frames + og * oh * ow * nv
    backward = 2 * frames + grads + sums + (k + 1) * og
    tables = k + ROWS + COLS + oh * ow + COLS
    return max(forward, backward) + nv * nv + tables + nv


@jit
def exchange(arr, at, ld, m, count, h, w, cstride, wp, ph, pw, buf, buf_at, tmp_at, into, add):
    """Between samples and lanes: value f = (c*h + i)*w + j < count of sample t < m is
    ``arr[at + t*ld + f]`` and lane t of
    ``buf[buf_at + (c*cstride + (i + ph)*wp + j + pw)*lanes:]``.
    ``into``: the samples into the lanes (lanes t >= m zero); else the lanes into the samples
    (added when ``add``). ``buf[tmp_at:]`` holds one transpose block. (One function, one
    transpose: each inlined transpose or extra function costs compile time.)"""
    nv = simd.lanes(buf)
    hw = h * w
    identity = cstride == hw and wp == w and ph == 0 and pw == 0
    zero = buf.dtype.type(0.0)
    for f0 in range(0, count, nv):
        full = f0 + nv <= count and m == nv
        block = buf_at + f0 * nv if full and identity else tmp_at
        if full and into:
            simd.transpose(arr, at + f0, ld, buf, block, nv, False)
        if not (full and identity):
            c = f0 // hw
            i = (f0 - c * hw) // w
            j = f0 - c * hw - i * w
            for u in range(min(nv, count - f0)):
                d = buf_at + (c * cstride + (i + ph) * wp + j + pw) * nv
                if full and into:
                    simd.store(buf, d, simd.load(buf, tmp_at + u * nv))
                elif full:
                    simd.store(buf, tmp_at + u * nv, simd.load(buf, d))
                elif into:
                    for t in range(nv):
                        buf[d + t] = arr[at + t * ld + f0 + u] if t < m else zero
                else:
                    for t in range(m):
                        e = at + t * ld + f0 + u
                        arr[e] = arr[e] + buf[d + t] if add else buf[d + t]
                j += 1
                if j == w:
                    j = 0
                    i += 1
                    if i == h:
                        i = 0
                        c += 1
        if full and not into:
            simd.transpose(buf, block, nv, arr, at + f0, ld, add)


@jit
def offsets(taps, pos, k, kh, kw, dh, dw, hp, wp, oh, ow, nv):
    """taps[kk] = the frames' offset of tap kk = (c, r, s) for kk < k + ROWS + COLS (taps past
    the last repeat it), pos[j] = the offset of output position j's tap (0, 0, 0) for
    j < oh*ow + COLS (likewise): the tiles read these instead of dividing."""
    rs = kh * kw
    for kk in range(k + ROWS + COLS):
        t = min(kk, k - 1)
        c = t // rs
        r = (t - c * rs) // kw
        taps[kk] = ((c * hp + r * dh) * wp + (t - c * rs - r * kw) * dw) * nv
    pq = oh * ow
    for j in range(pq + COLS):
        t = min(j, pq - 1)
        p = t // ow
        pos[j] = (p * wp + t - p * ow) * nv


@jit
def lanes_forward(w, w_at, k, og, xs, x_at, taps, pos, pq, b, b_at, has_bias, ys, y_at):
    """ys[y_at + (o*pq + j)*lanes:] = the lanes of output channel o < og at output position
    j < pq: the frames at xs[x_at:] (tap and position offsets per :func:`offsets`) convolved
    with w[w_at:] (og rows of k taps), plus b[b_at + o] when ``has_bias``."""
    nv = simd.lanes(ys)
    last = pq - 1
    for j0 in range(0, pq, COLS):
        p0 = x_at + pos[j0 + 0]
        p1 = x_at + pos[j0 + 1]
        p2 = x_at + pos[j0 + 2]
        p3 = x_at + pos[j0 + 3]
        for o0 in range(0, og, ROWS):
            r0 = min(o0 + 0, og - 1)
            r1 = min(o0 + 1, og - 1)
            r2 = min(o0 + 2, og - 1)
            r3 = min(o0 + 3, og - 1)
            r4 = min(o0 + 4, og - 1)
            r5 = min(o0 + 5, og - 1)
            z = simd.zeros(ys)
            a0 = simd.splat(b, b_at + r0) if has_bias else z
            a1 = simd.splat(b, b_at + r1) if has_bias else z
            a2 = simd.splat(b, b_at + r2) if has_bias else z
            a3 = simd.splat(b, b_at + r3) if has_bias else z
            a4 = simd.splat(b, b_at + r4) if has_bias else z
            a5 = simd.splat(b, b_at + r5) if has_bias else z
            c00 = c01 = c02 = c03 = a0
            c10 = c11 = c12 = c13 = a1
            c20 = c21 = c22 = c23 = a2
            c30 = c31 = c32 = c33 = a3
            c40 = c41 = c42 = c43 = a4
            c50 = c51 = c52 = c53 = a5
            w0 = w_at + r0 * k
            w1 = w_at + r1 * k
            w2 = w_at + r2 * k
            w3 = w_at + r3 * k
            w4 = w_at + r4 * k
            w5 = w_at + r5 * k
            for kk in range(k):
                off = taps[kk]
                x0 = simd.load(xs, p0 + off)
                x1 = simd.load(xs, p1 + off)
                x2 = simd.load(xs, p2 + off)
                x3 = simd.load(xs, p3 + off)
                v = simd.splat(w, w0 + kk)
                c00 = simd.fma(v, x0, c00)
                c01 = simd.fma(v, x1, c01)
                c02 = simd.fma(v, x2, c02)
                c03 = simd.fma(v, x3, c03)
                v = simd.splat(w, w1 + kk)
                c10 = simd.fma(v, x0, c10)
                c11 = simd.fma(v, x1, c11)
                c12 = simd.fma(v, x2, c12)
                c13 = simd.fma(v, x3, c13)
                v = simd.splat(w, w2 + kk)
                c20 = simd.fma(v, x0, c20)
                c21 = simd.fma(v, x1, c21)
                c22 = simd.fma(v, x2, c22)
                c23 = simd.fma(v, x3, c23)
                v = simd.splat(w, w3 + kk)
                c30 = simd.fma(v, x0, c30)
                c31 = simd.fma(v, x1, c31)
                c32 = simd.fma(v, x2, c32)
                c33 = simd.fma(v, x3, c33)
                v = simd.splat(w, w4 + kk)
                c40 = simd.fma(v, x0, c40)
                c41 = simd.fma(v, x1, c41)
                c42 = simd.fma(v, x2, c42)
                c43 = simd.fma(v, x3, c43)
                v = simd.splat(w, w5 + kk)
                c50 = simd.fma(v, x0, c50)
                c51 = simd.fma(v, x1, c51)
                c52 = simd.fma(v, x2, c52)
                c53 = simd.fma(v, x3, c53)
            # clamped rows and positions store the same values twice
            q0 = min(j0 + 0, last) * nv
            q1 = min(j0 + 1, last) * nv
            q2 = min(j0 + 2, last) * nv
            q3 = min(j0 + 3, last) * nv
            at = y_at + r0 * pq * nv
            simd.store(ys, at + q0, c00)
            simd.store(ys, at + q1, c01)
            simd.store(ys, at + q2, c02)
            simd.store(ys, at + q3, c03)
            at = y_at + r1 * pq * nv
            simd.store(ys, at + q0, c10)
            simd.store(ys, at + q1, c11)
            simd.store(ys, at + q2, c12)
            simd.store(ys, at + q3, c13)
            at = y_at + r2 * pq * nv
            simd.store(ys, at + q0, c20)
            simd.store(ys, at + q1, c21)
            simd.store(ys, at + q2, c22)
            simd.store(ys, at + q3, c23)
            at = y_at + r3 * pq * nv
            simd.store(ys, at + q0, c30)
            simd.store(ys, at + q1, c31)
            simd.store(ys, at + q2, c32)
            simd.store(ys, at + q3, c33)
            at = y_at + r4 * pq * nv
            simd.store(ys, at + q0, c40)
            simd.store(ys, at + q1, c41)
            simd.store(ys, at + q2, c42)
            simd.store(ys, at + q3, c43)
            at = y_at + r5 * pq * nv
            simd.store(ys, at + q0, c50)
            simd.store(ys, at + q1, c51)
            simd.store(ys, at + q2, c52)
            simd.store(ys, at + q3, c53)


@jit
def lanes_weight_gradient(dys, dy_at, ldy, og, xs, x_at, taps, k, pos, pq, sums, sums_at, ldk):
    """sums[sums_at + (o*ldk + kk)*lanes:] += the sum over output positions j < pq of
    dys[dy_at + (o*ldy + j)*lanes:] times the frames' (xs[x_at:]) vector at tap kk of position
    j, lane by lane, for o < og rounded up to ROWS and kk < k rounded up to COLS (the rows and
    taps past the ends repeat the last: their sums are not used)."""
    nv = simd.lanes(sums)
    for o0 in range(0, og, ROWS):
        d0 = dy_at + min(o0 + 0, og - 1) * ldy * nv
        d1 = dy_at + min(o0 + 1, og - 1) * ldy * nv
        d2 = dy_at + min(o0 + 2, og - 1) * ldy * nv
        d3 = dy_at + min(o0 + 3, og - 1) * ldy * nv
        d4 = dy_at + min(o0 + 4, og - 1) * ldy * nv
        d5 = dy_at + min(o0 + 5, og - 1) * ldy * nv
        for k0 in range(0, k, COLS):
            t0 = x_at + taps[k0 + 0]
            t1 = x_at + taps[k0 + 1]
            t2 = x_at + taps[k0 + 2]
            t3 = x_at + taps[k0 + 3]
            z = simd.zeros(sums)
            c00 = c01 = c02 = c03 = c10 = c11 = c12 = c13 = c20 = c21 = c22 = c23 = z
            c30 = c31 = c32 = c33 = c40 = c41 = c42 = c43 = c50 = c51 = c52 = c53 = z
            for j in range(pq):
                xq = pos[j]
                dq = j * nv
                x0 = simd.load(xs, t0 + xq)
                x1 = simd.load(xs, t1 + xq)
                x2 = simd.load(xs, t2 + xq)
                x3 = simd.load(xs, t3 + xq)
                g = simd.load(dys, d0 + dq)
                c00 = simd.fma(g, x0, c00)
                c01 = simd.fma(g, x1, c01)
                c02 = simd.fma(g, x2, c02)
                c03 = simd.fma(g, x3, c03)
                g = simd.load(dys, d1 + dq)
                c10 = simd.fma(g, x0, c10)
                c11 = simd.fma(g, x1, c11)
                c12 = simd.fma(g, x2, c12)
                c13 = simd.fma(g, x3, c13)
                g = simd.load(dys, d2 + dq)
                c20 = simd.fma(g, x0, c20)
                c21 = simd.fma(g, x1, c21)
                c22 = simd.fma(g, x2, c22)
                c23 = simd.fma(g, x3, c23)
                g = simd.load(dys, d3 + dq)
                c30 = simd.fma(g, x0, c30)
                c31 = simd.fma(g, x1, c31)
                c32 = simd.fma(g, x2, c32)
                c33 = simd.fma(g, x3, c33)
                g = simd.load(dys, d4 + dq)
                c40 = simd.fma(g, x0, c40)
                c41 = simd.fma(g, x1, c41)
                c42 = simd.fma(g, x2, c42)
                c43 = simd.fma(g, x3, c43)
                g = simd.load(dys, d5 + dq)
                c50 = simd.fma(g, x0, c50)
                c51 = simd.fma(g, x1, c51)
                c52 = simd.fma(g, x2, c52)
                c53 = simd.fma(g, x3, c53)
            at = sums_at + (o0 * ldk + k0) * nv
            row = ldk * nv
            a = at
            simd.store(sums, a, simd.add(simd.load(sums, a), c00))
            simd.store(sums, a + nv, simd.add(simd.load(sums, a + nv), c01))
            simd.store(sums, a + 2 * nv, simd.add(simd.load(sums, a + 2 * nv), c02))
            simd.store(sums, a + 3 * nv, simd.add(simd.load(sums, a + 3 * nv), c03))
            a = at + row
            simd.store(sums, a, simd.add(simd.load(sums, a), c10))
            simd.store(sums, a + nv, simd.add(simd.load(sums, a + nv), c11))
            simd.store(sums, a + 2 * nv, simd.add(simd.load(sums, a + 2 * nv), c12))
            simd.store(sums, a + 3 * nv, simd.add(simd.load(sums, a + 3 * nv), c13))
            a = at + 2 * row
            simd.store(sums, a, simd.add(simd.load(sums, a), c20))
            simd.store(sums, a + nv, simd.add(simd.load(sums, a + nv), c21))
            simd.store(sums, a + 2 * nv, simd.add(simd.load(sums, a + 2 * nv), c22))
            simd.store(sums, a + 3 * nv, simd.add(simd.load(sums, a + 3 * nv), c23))
            a = at + 3 * row
            simd.store(sums, a, simd.add(simd.load(sums, a), c30))
            simd.store(sums, a + nv, simd.add(simd.load(sums, a + nv), c31))
            simd.store(sums, a + 2 * nv, simd.add(simd.load(sums, a + 2 * nv), c32))
            simd.store(sums, a + 3 * nv, simd.add(simd.load(sums, a + 3 * nv), c33))
            a = at + 4 * row
            simd.store(sums, a, simd.add(simd.load(sums, a), c40))
            simd.store(sums, a + nv, simd.add(simd.load(sums, a + nv), c41))
            simd.store(sums, a + 2 * nv, simd.add(simd.load(sums, a + 2 * nv), c42))
            simd.store(sums, a + 3 * nv, simd.add(simd.load(sums, a + 3 * nv), c43))
            a = at + 5 * row
            simd.store(sums, a, simd.add(simd.load(sums, a), c50))
            simd.store(sums, a + nv, simd.add(simd.load(sums, a + nv), c51))
            simd.store(sums, a + 2 * nv, simd.add(simd.load(sums, a + 2 * nv), c52))
            simd.store(sums, a + 3 * nv, simd.add(simd.load(sums, a + 3 * nv), c53))


@jit
def lanes_input_gradient(wt, wt_at, og, k, dys, dy_at, ldy, taps, pos, pq, dxs, dx_at):
    """dxs[dx_at + pos[j] + taps[kk]:] += the sum over o < og of wt[wt_at + kk*og + o] *
    dys[dy_at + (o*ldy + j)*lanes:], lane by lane, for every output position j < pq and tap
    kk < k: the input gradient in the forward's frames. wt's row k must be zeros and dys's
    positions from pq to ldy too: the tiles' ends then add zeros."""
    nv = simd.lanes(dxs)
    for j0 in range(0, pq, COLS):
        e0 = dy_at + j0 * nv
        e1 = e0 + nv
        e2 = e0 + 2 * nv
        e3 = e0 + 3 * nv
        p0 = dx_at + pos[j0 + 0]
        p1 = dx_at + pos[j0 + 1]
        p2 = dx_at + pos[j0 + 2]
        p3 = dx_at + pos[j0 + 3]
        for k0 in range(0, k, ROWS):
            w0 = wt_at + min(k0 + 0, k) * og
            w1 = wt_at + min(k0 + 1, k) * og
            w2 = wt_at + min(k0 + 2, k) * og
            w3 = wt_at + min(k0 + 3, k) * og
            w4 = wt_at + min(k0 + 4, k) * og
            w5 = wt_at + min(k0 + 5, k) * og
            z = simd.zeros(dxs)
            c00 = c01 = c02 = c03 = c10 = c11 = c12 = c13 = c20 = c21 = c22 = c23 = z
            c30 = c31 = c32 = c33 = c40 = c41 = c42 = c43 = c50 = c51 = c52 = c53 = z
            for o in range(og):
                ob = o * ldy * nv
                g0 = simd.load(dys, e0 + ob)
                g1 = simd.load(dys, e1 + ob)
                g2 = simd.load(dys, e2 + ob)
                g3 = simd.load(dys, e3 + ob)
                v = simd.splat(wt, w0 + o)
                c00 = simd.fma(v, g0, c00)
                c01 = simd.fma(v, g1, c01)
                c02 = simd.fma(v, g2, c02)
                c03 = simd.fma(v, g3, c03)
                v = simd.splat(wt, w1 + o)
                c10 = simd.fma(v, g0, c10)
                c11 = simd.fma(v, g1, c11)
                c12 = simd.fma(v, g2, c12)
                c13 = simd.fma(v, g3, c13)
                v = simd.splat(wt, w2 + o)
                c20 = simd.fma(v, g0, c20)
                c21 = simd.fma(v, g1, c21)
                c22 = simd.fma(v, g2, c22)
                c23 = simd.fma(v, g3, c23)
                v = simd.splat(wt, w3 + o)
                c30 = simd.fma(v, g0, c30)
                c31 = simd.fma(v, g1, c31)
                c32 = simd.fma(v, g2, c32)
                c33 = simd.fma(v, g3, c33)
                v = simd.splat(wt, w4 + o)
                c40 = simd.fma(v, g0, c40)
                c41 = simd.fma(v, g1, c41)
                c42 = simd.fma(v, g2, c42)
                c43 = simd.fma(v, g3, c43)
                v = simd.splat(wt, w5 + o)
                c50 = simd.fma(v, g0, c50)
                c51 = simd.fma(v, g1, c51)
                c52 = simd.fma(v, g2, c52)
                c53 = simd.fma(v, g3, c53)
            t = taps[k0 + 0]
            simd.store(dxs, t + p0, simd.add(simd.load(dxs, t + p0), c00))
            simd.store(dxs, t + p1, simd.add(simd.load(dxs, t + p1), c01))
            simd.store(dxs, t + p2, simd.add(simd.load(dxs, t + p2), c02))
            simd.store(dxs, t + p3, simd.add(simd.load(dxs, t + p3), c03))
            t = taps[k0 + 1]
            simd.store(dxs, t + p0, simd.add(simd.load(dxs, t + p0), c10))
            simd.store(dxs, t + p1, simd.add(simd.load(dxs, t + p1), c11))
            simd.store(dxs, t + p2, simd.add(simd.load(dxs, t + p2), c12))
            simd.store(dxs, t + p3, simd.add(simd.load(dxs, t + p3), c13))
            t = taps[k0 + 2]
            simd.store(dxs, t + p0, simd.add(simd.load(dxs, t + p0), c20))
            simd.store(dxs, t + p1, simd.add(simd.load(dxs, t + p1), c21))
            simd.store(dxs, t + p2, simd.add(simd.load(dxs, t + p2), c22))
            simd.store(dxs, t + p3, simd.add(simd.load(dxs, t + p3), c23))
            t = taps[k0 + 3]
            simd.store(dxs, t + p0, simd.add(simd.load(dxs, t + p0), c30))
            simd.store(dxs, t + p1, simd.add(simd.load(dxs, t + p1), c31))
            simd.store(dxs, t + p2, simd.add(simd.load(dxs, t + p2), c32))
            simd.store(dxs, t + p3, simd.add(simd.load(dxs, t + p3), c33))
            t = taps[k0 + 4]
            simd.store(dxs, t + p0, simd.add(simd.load(dxs, t + p0), c40))
            simd.store(dxs, t + p1, simd.add(simd.load(dxs, t + p1), c41))
            simd.store(dxs, t + p2, simd.add(simd.load(dxs, t + p2), c42))
            simd.store(dxs, t + p3, simd.add(simd.load(dxs, t + p3), c43))
            t = taps[k0 + 5]
            simd.store(dxs, t + p0, simd.add(simd.load(dxs, t + p0), c50))
            simd.store(dxs, t + p1, simd.add(simd.load(dxs, t + p1), c51))
            simd.store(dxs, t + p2, simd.add(simd.load(dxs, t + p2), c52))
            simd.store(dxs, t + p3, simd.add(simd.load(dxs, t + p3), c53))


@jit
def forward(x, w, b, y, has_bias, c, h, ww, o, kh, kw, ph, pw, dh, dw, groups, oh, ow, scratch):
    """y = conv2d(x, w) + b at stride 1 through the lanes (module doc); scratch per
    :func:`scratch_elements`."""
    nv = simd.lanes(y)
    cg = c // groups
    og = o // groups
    k = cg * kh * kw
    pq = oh * ow
    hp = oh + (kh - 1) * dh
    wp = ow + (kw - 1) * dw
    at = simd.align_offset(scratch, 0)
    y_at = at + cg * hp * wp * nv
    tmp_at = y_at + og * pq * nv
    tab_at = tmp_at + nv * nv
    if scratch.shape[0] < tab_at + k + ROWS + 2 * COLS + pq:
        raise IndexError("conv2d: scratch too small for the lanes kernels")
    taps = int_view1d(scratch, tab_at, k + ROWS + COLS)
    pos = int_view1d(scratch, tab_at + k + ROWS + COLS, pq + COLS)
    offsets(taps, pos, k, kh, kw, dh, dw, hp, wp, oh, ow, nv)
    zero = y.dtype.type(0.0)
    if hp * wp != h * ww:  # the frames' padding, never written after
        for t in range(at, y_at):
            scratch[t] = zero
    n = x.shape[0] // (c * h * ww)
    for i0 in range(0, n, nv):
        m = min(nv, n - i0)
        for g in range(groups):
            exchange(x, (i0 * c + g * cg) * h * ww, c * h * ww, m, cg * h * ww, h, ww, hp * wp,
                     wp, ph, pw, scratch, at, tmp_at, True, False)
            lanes_forward(w, g * og * k, k, og, scratch, at, taps, pos, pq, b, g * og, has_bias,
                          scratch, y_at)
            exchange(y, (i0 * o + g * og) * pq, o * pq, m, og * pq, oh, ow, pq, ow, 0, 0,
                     scratch, y_at, tmp_at, False, False)


@jit
def backward(x, w, dy, dx, dwt, db, need_x, need_w, need_b, c, h, ww, o, kh, kw, ph, pw, dh, dw,
             groups, oh, ow, scratch):
    """dx +=, dwt += and db += the gradients of :func:`forward` (each when needed)."""
    nv = simd.lanes(dy)
    cg = c // groups
    og = o // groups
    k = cg * kh * kw
    pq = oh * ow
    hp = oh + (kh - 1) * dh
    wp = ow + (kw - 1) * dw
    frames = cg * hp * wp * nv
    pqp = (pq + COLS - 1) // COLS * COLS
    ldk = (k + COLS - 1) // COLS * COLS
    x_at = simd.align_offset(scratch, 0)
    dy_at = x_at + frames
    dx_at = dy_at + og * pqp * nv
    sums_at = dx_at + frames
    wt_at = sums_at + (og + ROWS - 1) // ROWS * ROWS * ldk * nv
    tmp_at = wt_at + (k + 1) * og
    tab_at = tmp_at + nv * nv
    if scratch.shape[0] < tab_at + k + ROWS + 2 * COLS + pq:
        raise IndexError("conv2d: scratch too small for the lanes kernels")
    taps = int_view1d(scratch, tab_at, k + ROWS + COLS)
    pos = int_view1d(scratch, tab_at + k + ROWS + COLS, pq + COLS)
    offsets(taps, pos, k, kh, kw, dh, dw, hp, wp, oh, ow, nv)
    zero = dy.dtype.type(0.0)
    if need_w and hp * wp != h * ww:  # the frames' padding, never written after
        for t in range(x_at, dy_at):
            scratch[t] = zero
    for oc in range(og):  # the positions past the last (read by the input gradient's tiles)
        for t in range((oc * pqp + pq) * nv, (oc + 1) * pqp * nv):
            scratch[dy_at + t] = zero
    for t in range(sums_at, tmp_at):  # the sums, the weight's zero row
        scratch[t] = zero
    n = x.shape[0] // (c * h * ww)
    for g in range(groups):
        if need_x:  # wt[kk, oc] = w[oc, kk]
            for oc in range(og):
                for kk in range(k):
                    scratch[wt_at + kk * og + oc] = w[(g * og + oc) * k + kk]
        for i0 in range(0, n, nv):
            m = min(nv, n - i0)
            exchange(dy, (i0 * o + g * og) * pq, o * pq, m, og * pq, oh, ow, pqp, ow, 0, 0,
                     scratch, dy_at, tmp_at, True, False)
            if need_b:  # (the lanes past the samples are zeros)
                for oc in range(og):
                    total = simd.zeros(scratch)
                    for j in range(pq):
                        total = simd.add(total, simd.load(scratch, dy_at + (oc * pqp + j) * nv))
                    db[g * og + oc] += simd.total(total)
            if need_w:
                exchange(x, (i0 * c + g * cg) * h * ww, c * h * ww, m, cg * h * ww, h, ww,
                         hp * wp, wp, ph, pw, scratch, x_at, tmp_at, True, False)
                lanes_weight_gradient(scratch, dy_at, pqp, og, scratch, x_at, taps, k, pos, pq,
                                      scratch, sums_at, ldk)
            if need_x:
                for t in range(dx_at, dx_at + frames):
                    scratch[t] = zero
                lanes_input_gradient(scratch, wt_at, og, k, scratch, dy_at, pqp, taps, pos, pq,
                                     scratch, dx_at)
                exchange(dx, (i0 * c + g * cg) * h * ww, c * h * ww, m, cg * h * ww, h, ww,
                         hp * wp, wp, ph, pw, scratch, dx_at, tmp_at, False, True)
        if need_w:  # the group's lanes summed into dwt, the sums zeroed for the next group
            for oc in range(og):
                for kk in range(k):
                    at = sums_at + (oc * ldk + kk) * nv
                    dwt[(g * og + oc) * k + kk] += simd.total(simd.load(scratch, at))
            for t in range(sums_at, wt_at):
                scratch[t] = zero
