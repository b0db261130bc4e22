"""3x3 stride-1 convolutions by Winograd's F(2x2, 3x3) with the samples in the vector lanes.

Each 2x2 block of outputs ("tile") of a channel is computed from the 4x4 input patch under it
with 16 multiplies per input channel instead of 36: the weight of every (output, input) channel
pair is transformed once per call, ``U = G g G^T`` (4x4), every input patch once per input
channel, ``V = B^T d B``, then the 16 positions xi of the 4x4 transformed tiles are 16
independent products ``M[xi] (K x tiles) = U[xi] (K x C) @ V[xi] (C x tiles)`` and the outputs
are ``Y = A^T M A`` per tile. The backward is the exact adjoint of those steps:
``dM = A dY A^T`` per tile, ``dU[xi] = dM[xi] @ V[xi]^T`` (summed over tiles and samples) and
``dW = G^T dU G``, ``dV[xi] = U[xi]^T @ dM[xi]`` and the input gradient ``B dV B^T`` added into
the (overlapping) patches.

A vector holds one value of ``lanes`` samples (16 float32) as in :mod:`nnjit.kernels.conv_lanes`,
whose register tiles run the products (:func:`lanes_forward` and :func:`lanes_weight_gradient`)
and whose transposes move the samples in and out (:func:`exchange`): so the transforms are
vector adds with no shuffles, for any image size, and a last tile past an odd image's edge reads
the frames' zero padding. The tiles are transformed and multiplied NB at a time, so a block's V
and M (16 x channels x NB vectors each) stay in the L2 between the steps.
"""

from nnjit.kernels import simd
from nnjit.kernels._jit import jit
from nnjit.kernels.conv_lanes import COLS, ROWS, exchange, lanes_forward, lanes_weight_gradient
from nnjit.kernels.int_views import int_view1d

#: tiles per block (module doc): a block's V and M are 2 x 16 x 32 x NB vectors for 32 channels
NB = 8
#: lanes of the widest vector (float32): the scratch is sized for it
MAX_LANES = 16


@jit
def layout(c, o, oh, ow, nv):
    """(tile rows, tile columns, elements of the input frames (c, 2*th + 2, 2*tw + 2, nv), of the
    output's lanes (o, 2*th, 2*tw, nv), of a block's V (16, c, NB, nv) and of its M (16, o, NB,
    nv), of the weight gradient's vector sums (16, o up to ROWS, c up to COLS, nv))."""
    th, tw = (oh + 1) // 2, (ow + 1) // 2
    ldk = (c + COLS - 1) // COLS * COLS
    sums = 16 * ((o + ROWS - 1) // ROWS * ROWS) * ldk * nv
    return (th, tw, c * (2 * th + 2) * (2 * tw + 2) * nv, o * 4 * th * tw * nv, 16 * c * NB * nv,
            16 * o * NB * nv, sums)


def scratch_elements(c, o, oh, ow):
    """Scratch elements the Winograd kernels need (float32's lanes, the widest; one line more
    for the alignment): forward, the frames, the output's lanes, a block's V and M, the
    transformed weights; backward, the frames of the input and of its gradient, the output
    gradient's lanes, V and M, the weight gradient's sums, the transformed weights twice; both, a
    transpose block and the offset tables."""
    nv = MAX_LANES
    _, _, frames, outs, v, m, sums = layout.py_func(c, o, oh, ow, nv)
    forward = frames + outs + v + m + 16 * o * c
    backward = 2 * frames + outs + v + m + sums + 32 * o * c
    tables = 2 * (max(c, o) + ROWS + COLS) + NB + COLS
    return max(forward, backward) + nv * nv + tables + nv


@jit
def tables(taps_c, taps_o, c, o, nv):
    """The products' channel offsets (:func:`nnjit.kernels.conv_lanes.offsets`' taps) in a
    block: channel j of V at taps_c[j] (j < c + ROWS + COLS, the last repeated), of M at
    taps_o[j] (j < o + ROWS + COLS)."""
    for j in range(c + ROWS + COLS):
        taps_c[j] = min(j, c - 1) * NB * nv
    for j in range(o + ROWS + COLS):
        taps_o[j] = min(j, o - 1) * NB * nv


@jit(inline="always")
def _positions(pos, nb, nv):
    """pos[t] = the block's tile t's offset (t < NB + COLS; past nb - 1 the last repeated, so
    the products' clamped columns store the last tile's value again)."""
    for t in range(NB + COLS):
        pos[t] = min(t, nb - 1) * nv


@jit
def filter_transform(w, o, c, u, u_at, transposed):
    """u[u_at + (xi*o + k)*c + j] (u[u_at + (xi*c + j)*o + k] when ``transposed``) =
    (G g G^T)[xi] for the 3x3 weight g = w[k, j] of w (o, c, 3, 3)."""
    half = u.dtype.type(0.5)
    for k in range(o):
        for j in range(c):
            g = (k * c + j) * 9
            # G over the rows (G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1]), one column at a time
            r0, r1, r2 = w[g], w[g + 3], w[g + 6]
            ga = (r0, half * (r0 + r1 + r2), half * (r0 - r1 + r2), r2)
            r0, r1, r2 = w[g + 1], w[g + 4], w[g + 7]
            gb = (r0, half * (r0 + r1 + r2), half * (r0 - r1 + r2), r2)
            r0, r1, r2 = w[g + 2], w[g + 5], w[g + 8]
            gc = (r0, half * (r0 + r1 + r2), half * (r0 - r1 + r2), r2)
            for a in range(4):  # ... then over the columns
                x0, x1, x2 = ga[a], gb[a], gc[a]
                row = (x0, half * (x0 + x1 + x2), half * (x0 - x1 + x2), x2)
                for b in range(4):
                    xi = a * 4 + b
                    at = (xi * c + j) * o + k if transposed else (xi * o + k) * c + j
                    u[u_at + at] = row[b]


@jit
def filter_adjoint(du, o, c, dwt):
    """dwt[(k*c + j)*9:] += G^T du G for the 4x4 du[(xi*o + k)*c + j] (the adjoint of
    :func:`filter_transform`)."""
    half = du.dtype.type(0.5)
    for k in range(o):
        for j in range(c):
            # G^T over the rows (G^T = [1 .5 .5 0; 0 .5 -.5 0; 0 .5 .5 1]), one column at a time
            g = (k * c + j) * 9
            for b in range(4):
                u0 = du[((0 + b) * o + k) * c + j]
                u1 = du[((4 + b) * o + k) * c + j]
                u2 = du[((8 + b) * o + k) * c + j]
                u3 = du[((12 + b) * o + k) * c + j]
                s = half * (u1 + u2)
                d = half * (u1 - u2)
                # ... and the column b spread over the 3 columns
                for r, x in enumerate((u0 + s, d, s + u3)):
                    if b == 0:
                        dwt[g + r * 3] += x
                    elif b == 1:
                        dwt[g + r * 3] += half * x
                        dwt[g + r * 3 + 1] += half * x
                        dwt[g + r * 3 + 2] += half * x
                    elif b == 2:
                        dwt[g + r * 3] += half * x
                        dwt[g + r * 3 + 1] -= half * x
                        dwt[g + r * 3 + 2] += half * x
                    else:
                        dwt[g + r * 3 + 2] += x


@jit
def input_transform(fr, fr_at, c, hp, wp, tw, t0, nb, v, v_at):
    """v[v_at + ((xi*c + j)*NB + t)*lanes:] = (B^T d B)[xi] for the 4x4 input patch d of tile
    t0 + t (t < nb) of channel j in the frames fr[fr_at:] (c, hp, wp, lanes)."""
    nv = simd.lanes(v)
    step = NB * c * nv
    q = wp * nv
    for j in range(c):
        for t in range(nb):
            ti = (t0 + t) // tw
            p = fr_at + ((j * hp + 2 * ti) * wp + 2 * (t0 + t - ti * tw)) * nv
            d00 = simd.load(fr, p)
            d01 = simd.load(fr, p + nv)
            d02 = simd.load(fr, p + 2 * nv)
            d03 = simd.load(fr, p + 3 * nv)
            p += q
            d10 = simd.load(fr, p)
            d11 = simd.load(fr, p + nv)
            d12 = simd.load(fr, p + 2 * nv)
            d13 = simd.load(fr, p + 3 * nv)
            p += q
            d20 = simd.load(fr, p)
            d21 = simd.load(fr, p + nv)
            d22 = simd.load(fr, p + 2 * nv)
            d23 = simd.load(fr, p + 3 * nv)
            p += q
            d30 = simd.load(fr, p)
            d31 = simd.load(fr, p + nv)
            d32 = simd.load(fr, p + 2 * nv)
            d33 = simd.load(fr, p + 3 * nv)
            # B^T over the rows: (d0 - d2, d1 + d2, d2 - d1, d1 - d3) ...
            e00 = simd.sub(d00, d20)
            e01 = simd.sub(d01, d21)
            e02 = simd.sub(d02, d22)
            e03 = simd.sub(d03, d23)
            e10 = simd.add(d10, d20)
            e11 = simd.add(d11, d21)
            e12 = simd.add(d12, d22)
            e13 = simd.add(d13, d23)
            e20 = simd.sub(d20, d10)
            e21 = simd.sub(d21, d11)
            e22 = simd.sub(d22, d12)
            e23 = simd.sub(d23, d13)
            e30 = simd.sub(d10, d30)
            e31 = simd.sub(d11, d31)
            e32 = simd.sub(d12, d32)
            e33 = simd.sub(d13, d33)
            # ... and over the columns, each stored at its xi
            o = v_at + (j * NB + t) * nv
            simd.store(v, o, simd.sub(e00, e02))
            simd.store(v, o + step, simd.add(e01, e02))
            simd.store(v, o + 2 * step, simd.sub(e02, e01))
            simd.store(v, o + 3 * step, simd.sub(e01, e03))
            o += 4 * step
            simd.store(v, o, simd.sub(e10, e12))
            simd.store(v, o + step, simd.add(e11, e12))
            simd.store(v, o + 2 * step, simd.sub(e12, e11))
            simd.store(v, o + 3 * step, simd.sub(e11, e13))
            o += 4 * step
            simd.store(v, o, simd.sub(e20, e22))
            simd.store(v, o + step, simd.add(e21, e22))
            simd.store(v, o + 2 * step, simd.sub(e22, e21))
            simd.store(v, o + 3 * step, simd.sub(e21, e23))
            o += 4 * step
            simd.store(v, o, simd.sub(e30, e32))
            simd.store(v, o + step, simd.add(e31, e32))
            simd.store(v, o + 2 * step, simd.sub(e32, e31))
            simd.store(v, o + 3 * step, simd.sub(e31, e33))


@jit
def input_adjoint(dv, dv_at, c, ld, hp, wp, tw, t0, nb, fr, fr_at):
    """fr[fr_at:] (frames (c, hp, wp, lanes)) += B dV B^T at the 4x4 patch of tile t0 + t
    (t < nb) of channel j, for dV[xi] = dv[dv_at + ((xi*c + j)*ld + t)*lanes:] (the adjoint of
    :func:`input_transform`; neighbouring patches overlap, so they are added one by one)."""
    nv = simd.lanes(fr)
    step = ld * c * nv
    q = wp * nv
    for j in range(c):
        for t in range(nb):
            o = dv_at + (j * ld + t) * nv
            v00 = simd.load(dv, o)
            v01 = simd.load(dv, o + step)
            v02 = simd.load(dv, o + 2 * step)
            v03 = simd.load(dv, o + 3 * step)
            o += 4 * step
            v10 = simd.load(dv, o)
            v11 = simd.load(dv, o + step)
            v12 = simd.load(dv, o + 2 * step)
            v13 = simd.load(dv, o + 3 * step)
            o += 4 * step
            v20 = simd.load(dv, o)
            v21 = simd.load(dv, o + step)
            v22 = simd.load(dv, o + 2 * step)
            v23 = simd.load(dv, o + 3 * step)
            o += 4 * step
            v30 = simd.load(dv, o)
            v31 = simd.load(dv, o + step)
            v32 = simd.load(dv, o + 2 * step)
            v33 = simd.load(dv, o + 3 * step)
            # B over the rows: (v0, v1 - v2 + v3, v1 + v2 - v0, -v3) ...
            e10 = simd.add(simd.sub(v10, v20), v30)
            e11 = simd.add(simd.sub(v11, v21), v31)
            e12 = simd.add(simd.sub(v12, v22), v32)
            e13 = simd.add(simd.sub(v13, v23), v33)
            e20 = simd.sub(simd.add(v10, v20), v00)
            e21 = simd.sub(simd.add(v11, v21), v01)
            e22 = simd.sub(simd.add(v12, v22), v02)
            e23 = simd.sub(simd.add(v13, v23), v03)
            # ... and over the columns, added into the patch (rows 0 and 3 are v0 and -v3)
            ti = (t0 + t) // tw
            p = fr_at + ((j * hp + 2 * ti) * wp + 2 * (t0 + t - ti * tw)) * nv
            _add_row(fr, p, nv, v00, v01, v02, v03, False)
            _add_row(fr, p + q, nv, e10, e11, e12, e13, False)
            _add_row(fr, p + 2 * q, nv, e20, e21, e22, e23, False)
            _add_row(fr, p + 3 * q, nv, v30, v31, v32, v33, True)


@jit(inline="always")
def _add_row(fr, p, nv, r0, r1, r2, r3, negate):
    """fr[p:] += (r0, r1 - r2 + r3, r1 + r2 - r0, -r3) (negated when ``negate``), 4 vectors."""
    c0 = r0
    c1 = simd.add(simd.sub(r1, r2), r3)
    c2 = simd.sub(simd.add(r1, r2), r0)
    if negate:
        simd.store(fr, p, simd.sub(simd.load(fr, p), c0))
        simd.store(fr, p + nv, simd.sub(simd.load(fr, p + nv), c1))
        simd.store(fr, p + 2 * nv, simd.sub(simd.load(fr, p + 2 * nv), c2))
        simd.store(fr, p + 3 * nv, simd.add(simd.load(fr, p + 3 * nv), r3))
    else:
        simd.store(fr, p, simd.add(simd.load(fr, p), c0))
        simd.store(fr, p + nv, simd.add(simd.load(fr, p + nv), c1))
        simd.store(fr, p + 2 * nv, simd.add(simd.load(fr, p + 2 * nv), c2))
        simd.store(fr, p + 3 * nv, simd.sub(simd.load(fr, p + 3 * nv), r3))


@jit
def output_transform(m, m_at, o, nb, th, tw, t0, b, has_bias, ys, y_at):
    """ys[y_at + ((k*2*th + y)*2*tw + x)*lanes:] = (A^T M A) of tile t0 + t (t < nb), output
    channel k < o, plus b[k] when ``has_bias``, for the products
    m[m_at + ((xi*o + k)*nb + t)*lanes:]."""
    nv = simd.lanes(ys)
    step = o * nb * nv
    row = 2 * tw * nv
    for k in range(o):
        z = simd.splat(b, k) if has_bias else simd.zeros(ys)
        for t in range(nb):
            p = m_at + (k * nb + t) * nv
            m00 = simd.load(m, p)
            m01 = simd.load(m, p + step)
            m02 = simd.load(m, p + 2 * step)
            m03 = simd.load(m, p + 3 * step)
            p += 4 * step
            m10 = simd.load(m, p)
            m11 = simd.load(m, p + step)
            m12 = simd.load(m, p + 2 * step)
            m13 = simd.load(m, p + 3 * step)
            p += 4 * step
            m20 = simd.load(m, p)
            m21 = simd.load(m, p + step)
            m22 = simd.load(m, p + 2 * step)
            m23 = simd.load(m, p + 3 * step)
            p += 4 * step
            m30 = simd.load(m, p)
            m31 = simd.load(m, p + step)
            m32 = simd.load(m, p + 2 * step)
            m33 = simd.load(m, p + 3 * step)
            # A^T over the rows: (m0 + m1 + m2, m1 - m2 - m3) ...
            a0 = simd.add(simd.add(m00, m10), m20)
            a1 = simd.add(simd.add(m01, m11), m21)
            a2 = simd.add(simd.add(m02, m12), m22)
            a3 = simd.add(simd.add(m03, m13), m23)
            c0 = simd.sub(simd.sub(m10, m20), m30)
            c1 = simd.sub(simd.sub(m11, m21), m31)
            c2 = simd.sub(simd.sub(m12, m22), m32)
            c3 = simd.sub(simd.sub(m13, m23), m33)
            # ... and over the columns
            ti = (t0 + t) // tw
            q = y_at + ((k * th + ti) * 2 * row + 2 * (t0 + t - ti * tw) * nv)
            simd.store(ys, q, simd.add(simd.add(simd.add(a0, a1), a2), z))
            simd.store(ys, q + nv, simd.add(simd.sub(simd.sub(a1, a2), a3), z))
            simd.store(ys, q + row, simd.add(simd.add(simd.add(c0, c1), c2), z))
            simd.store(ys, q + row + nv, simd.add(simd.sub(simd.sub(c1, c2), c3), z))


@jit
def output_adjoint(dys, dy_at, o, th, tw, t0, nb, dm, dm_at):
    """dm[dm_at + ((xi*o + k)*NB + t)*lanes:] = (A dY A^T)[xi] for the 2x2 output gradient dY
    of tile t0 + t (t < nb) of channel k in dys[dy_at:] (o, 2*th, 2*tw, lanes) (the adjoint of
    :func:`output_transform`)."""
    nv = simd.lanes(dm)
    step = o * NB * nv
    row = 2 * tw * nv
    for k in range(o):
        for t in range(nb):
            ti = (t0 + t) // tw
            q = dy_at + ((k * th + ti) * 2 * row + 2 * (t0 + t - ti * tw) * nv)
            g00 = simd.load(dys, q)
            g01 = simd.load(dys, q + nv)
            g10 = simd.load(dys, q + row)
            g11 = simd.load(dys, q + row + nv)
            # A over the rows (A = [1 0; 1 1; 1 -1; 0 -1]): (g0, g0 + g1, g0 - g1, -g1) ...
            h10 = simd.add(g00, g10)
            h11 = simd.add(g01, g11)
            h20 = simd.sub(g00, g10)
            h21 = simd.sub(g01, g11)
            z = simd.zeros(dm)
            p = dm_at + (k * NB + t) * nv
            _put_row(dm, p, step, g00, g01, z, False)
            _put_row(dm, p + 4 * step, step, h10, h11, z, False)
            _put_row(dm, p + 8 * step, step, h20, h21, z, False)
            _put_row(dm, p + 12 * step, step, g10, g11, z, True)


@jit(inline="always")
def _put_row(dm, p, step, r0, r1, z, negate):
    """dm[p + b*step:] = (r0, r0 + r1, r0 - r1, -r1)[b] (negated when ``negate``), b < 4."""
    if negate:
        simd.store(dm, p, simd.sub(z, r0))
        simd.store(dm, p + step, simd.sub(z, simd.add(r0, r1)))
        simd.store(dm, p + 2 * step, simd.sub(r1, r0))
        simd.store(dm, p + 3 * step, r1)
    else:
        simd.store(dm, p, r0)
        simd.store(dm, p + step, simd.add(r0, r1))
        simd.store(dm, p + 2 * step, simd.sub(r0, r1))
        simd.store(dm, p + 3 * step, simd.sub(z, r1))


@jit
def _clear(buf, start, stop):
    zero = buf.dtype.type(0.0)
    for t in range(start, stop):
        buf[t] = zero


@jit
def forward(x, w, b, y, has_bias, c, h, ww, o, ph, pw, oh, ow, scratch):
    """y = conv2d(x, w) + b for 3x3 weights w (o, c, 3, 3) at stride 1, the images placed at
    (ph, pw) in the frames (any padding: the frames cover the tiles); scratch per
    :func:`scratch_elements`."""
    nv = simd.lanes(y)
    th, tw, frames, outs, vb, mb, _ = layout(c, o, oh, ow, nv)
    hp = 2 * th + 2
    wp = 2 * tw + 2
    nt = th * tw
    at = simd.align_offset(scratch, 0)
    y_at = at + frames
    v_at = y_at + outs
    m_at = v_at + vb
    u_at = m_at + mb
    tmp_at = u_at + 16 * o * c
    tab_at = tmp_at + nv * nv
    n_tab = max(c, o) + ROWS + COLS
    if scratch.shape[0] < tab_at + 2 * n_tab + NB + COLS:
        raise IndexError("conv2d: scratch too small for the Winograd kernels")
    taps_c = int_view1d(scratch, tab_at, n_tab)
    taps_o = int_view1d(scratch, tab_at + n_tab, n_tab)
    pos = int_view1d(scratch, tab_at + 2 * n_tab, NB + COLS)
    tables(taps_c, taps_o, c, o, nv)
    filter_transform(w, o, c, scratch, u_at, False)
    _clear(scratch, at, y_at)  # the frames' padding, never written after
    n = x.shape[0] // (c * h * ww)
    for i0 in range(0, n, nv):
        m = min(nv, n - i0)
        exchange(x, i0 * c * h * ww, c * h * ww, m, c * h * ww, h, ww, hp * wp, wp, ph, pw,
                 scratch, at, tmp_at, True, False)
        for t0 in range(0, nt, NB):
            nb = min(NB, nt - t0)
            _positions(pos, nb, nv)
            input_transform(scratch, at, c, hp, wp, tw, t0, nb, scratch, v_at)
            for xi in range(16):
                lanes_forward(scratch, u_at + xi * o * c, c, o, scratch, v_at + xi * c * NB * nv,
                              taps_c, pos, nb, b, 0, False, scratch, m_at + xi * o * nb * nv)
            output_transform(scratch, m_at, o, nb, th, tw, t0, b, has_bias, scratch, y_at)
        exchange(y, i0 * o * oh * ow, o * oh * ow, m, o * oh * ow, oh, ow, 4 * th * tw, 2 * tw,
                 0, 0, scratch, y_at, tmp_at, False, False)


@jit
def backward(x, w, dy, dx, dwt, db, need_x, need_w, need_b, c, h, ww, o, ph, pw, oh, ow,
             scratch):
    """dx +=, dwt += and db += the gradients of :func:`forward` (each when needed)."""
    nv = simd.lanes(dy)
    th, tw, frames, outs, vb, mb, sums = layout(c, o, oh, ow, nv)
    hp = 2 * th + 2
    wp = 2 * tw + 2
    nt = th * tw
    ldk = (c + COLS - 1) // COLS * COLS
    rows = (o + ROWS - 1) // ROWS * ROWS
    x_at = simd.align_offset(scratch, 0)
    dx_at = x_at + frames
    dy_at = dx_at + frames
    v_at = dy_at + outs
    m_at = v_at + vb
    sums_at = m_at + mb
    ut_at = sums_at + sums
    du_at = ut_at + 16 * o * c
    tmp_at = du_at + 16 * o * c
    tab_at = tmp_at + nv * nv
    n_tab = max(c, o) + ROWS + COLS
    if scratch.shape[0] < tab_at + 2 * n_tab + NB + COLS:
        raise IndexError("conv2d: scratch too small for the Winograd kernels")
    taps_c = int_view1d(scratch, tab_at, n_tab)
    taps_o = int_view1d(scratch, tab_at + n_tab, n_tab)
    pos = int_view1d(scratch, tab_at + 2 * n_tab, NB + COLS)
    tables(taps_c, taps_o, c, o, nv)
    if need_x:
        filter_transform(w, o, c, scratch, ut_at, True)
    if need_w:
        _clear(scratch, x_at, dx_at)  # the frames' padding, never written after
        _clear(scratch, sums_at, ut_at)
    _clear(scratch, dy_at, v_at)  # the output gradient's tiles past an odd edge stay zero
    n = x.shape[0] // (c * h * ww)
    for i0 in range(0, n, nv):
        m = min(nv, n - i0)
        exchange(dy, i0 * o * oh * ow, o * oh * ow, m, o * oh * ow, oh, ow, 4 * th * tw, 2 * tw,
                 0, 0, scratch, dy_at, tmp_at, True, False)
        if need_b:  # (the lanes past the samples and the positions past the edges are zeros)
            for k in range(o):
                total = simd.zeros(scratch)
                for p in range(dy_at + k * 4 * th * tw * nv, dy_at + (k + 1) * 4 * th * tw * nv,
                               nv):
                    total = simd.add(total, simd.load(scratch, p))
                db[k] += simd.total(total)
        if not (need_x or need_w):
            continue
        if need_w:
            exchange(x, i0 * c * h * ww, c * h * ww, m, c * h * ww, h, ww, hp * wp, wp, ph, pw,
                     scratch, x_at, tmp_at, True, False)
        if need_x:
            _clear(scratch, dx_at, dy_at)
        for t0 in range(0, nt, NB):
            nb = min(NB, nt - t0)
            _positions(pos, nb, nv)
            output_adjoint(scratch, dy_at, o, th, tw, t0, nb, scratch, m_at)
            if need_w:
                input_transform(scratch, x_at, c, hp, wp, tw, t0, nb, scratch, v_at)
                for xi in range(16):
                    lanes_weight_gradient(scratch, m_at + xi * o * NB * nv, NB, o, scratch,
                                          v_at + xi * c * NB * nv, taps_c, c, pos, nb, scratch,
                                          sums_at + xi * rows * ldk * nv, ldk)
            if need_x:  # dV[xi] = U[xi]^T dM[xi], over V's block
                for xi in range(16):
                    lanes_forward(scratch, ut_at + xi * o * c, o, c, scratch,
                                  m_at + xi * o * NB * nv, taps_o, pos, nb, dy, 0, False,
                                  scratch, v_at + xi * c * nb * nv)
                input_adjoint(scratch, v_at, c, nb, hp, wp, tw, t0, nb, scratch, dx_at)
        if need_x:
            exchange(dx, i0 * c * h * ww, c * h * ww, m, c * h * ww, h, ww, hp * wp, wp, ph, pw,
                     scratch, dx_at, tmp_at, False, True)
    if need_w:  # the lanes summed, then dwt += G^T dU G
        for xi in range(16):
            for k in range(o):
                for j in range(c):
                    at = sums_at + ((xi * rows + k) * ldk + j) * nv
                    scratch[du_at + (xi * o + k) * c + j] = simd.total(simd.load(scratch, at))
        filter_adjoint(scratch[du_at:tmp_at], o, c, dwt)
