"""Stride-1 convolutions as register-blocked products over shifted frames (``ALGO_VECTOR``).

A sample's channels are copied into zero-padded frames ``(C, HP, WP)``, ``HP = OH + (KH-1)*DH``
and ``WP = OW + (KW-1)*DW``. Read flat, output ``j = p*WP + q`` of channel ``o`` is

    y[o, j] = sum over (c, r, s) of  w[o, c, r, s] * frame[c, j + r*DH*WP + s*DW]

for every ``j < OH*WP`` (the ``KW-1`` columns past ``OW`` in each row are computed and dropped).
That is a matrix product whose right operand's rows are the frames shifted: no column matrix is
built (im2col copies each input value KH*KW times) and no BLAS packing runs. :func:`shifted_product`
computes it in tiles of 8 output rows x 3 vectors, the 24 accumulators held in registers
(:mod:`nnjit.kernels.simd`), each step one broadcast weight and 24 FMAs.

The input gradient is the same product over the output gradient laid out the same way (rows
``WP`` wide, the dropped columns zero, a zero margin in front) with the weight flipped and
transposed. The weight gradient, ``dW[o, k] = sum over j of dy[o, j] * frame[k, j + shift]``, is
computed transposed (:func:`transposed_gradient`): the output gradient is copied with the
channels fastest, so a tile holds 12 ``k`` x 2 vectors of channels, takes one broadcast frame
value per ``k`` and position, and reduces over every position of several samples in registers.
Layers with fewer output channels than two vectors (LeNet's 6 and 16) reduce along the positions
instead (:func:`shifted_gradient`, 4 channels x 6 ``k``, lanes summed once per call): their
transposed tile would be mostly padding (LeNet's first layer: 1.1 ms against 0.3 ms per batch).

Measured on the VGG-style net's 3x3 layers (batch 64, 1 thread, float32, idle host with a
204 GFLOP/s GEMM peak, docs/performance.md): 139-170 GFLOP/s in every direction, against 61-91
for im2col + OpenBLAS at the same shapes and 168-179 for PyTorch's oneDNN.
"""

from nnjit.kernels import simd
from nnjit.kernels._jit import jit
from nnjit.kernels.views import view1d

#: rows of a product tile (output channels), and vectors across it
TILE_ROWS = 8
TILE_VECTORS = 3
#: columns of a tile at most (3 vectors of 16 float32 lanes): the frames' slack past their end
MAX_TILE_COLUMNS = TILE_VECTORS * 16
#: a weight-gradient tile: output channels x (channel, r, s) entries
GRADIENT_ROWS = 12
#: the transposed output gradient's rows hold the channels rounded up to two float32 vectors
GRADIENT_WIDTH = 32
#: the backward pass holds up to this many samples' frames and output gradients at once, within
#: about 1 MB of float32 (half this machine's L2)
MAX_GRADIENT_SAMPLES = 8
GRADIENT_ELEMENTS = 262_144


@jit(inline="always")
def round_up(n, step):
    """``n`` rounded up to a multiple of ``step``."""
    return (n + step - 1) // step * step


@jit(inline="always")
def layout(cg, og, kh, kw, dh, dw, oh, ow):
    """(frame elements, frames span, output-gradient row length, its margin, forward output
    span, input-gradient span, transposed output gradient's row length, transposed weight
    gradient span, one sample's backward span: frames, output-gradient rows, transposed output
    gradient) of one group of one sample (module doc)."""
    hp = oh + (kh - 1) * dh
    wp = ow + (kw - 1) * dw
    frame = hp * wp
    frames = cg * frame + wp + MAX_TILE_COLUMNS
    margin = (kh - 1) * dh * wp + (kw - 1) * dw
    grad_row = margin + frame + MAX_TILE_COLUMNS
    # (plain arithmetic, no calls: the record step runs this in Python)
    tiles, width = TILE_ROWS, MAX_TILE_COLUMNS
    out = (og + tiles - 1) // tiles * tiles * ((oh * wp + width - 1) // width * width)
    dx = (cg + tiles - 1) // tiles * tiles * ((frame + width - 1) // width * width)
    ldg = (og + GRADIENT_WIDTH - 1) // GRADIENT_WIDTH * GRADIENT_WIDTH
    k_rows = (cg * kh * kw + GRADIENT_ROWS - 1) // GRADIENT_ROWS * GRADIENT_ROWS
    span = frames + og * grad_row + oh * wp * ldg
    return frame, frames, grad_row, margin, out, dx, ldg, k_rows * ldg, span


def _layout_in_python(cg, og, kh, kw, dh, dw, oh, ow):
    return getattr(layout, "py_func", layout)(cg, og, kh, kw, dh, dw, oh, ow)


def samples_per_gradient(cg, og, kh, kw, dh, dw, oh, ow):
    """Samples whose frames and output gradients the backward pass holds at once: the weight
    gradient's tiles then sum their lanes once per that many samples, while the samples' data
    stays within GRADIENT_ELEMENTS (in L2)."""
    span = _layout_in_python(cg, og, kh, kw, dh, dw, oh, ow)[-1]
    return max(1, min(MAX_GRADIENT_SAMPLES, GRADIENT_ELEMENTS // span))


def scratch_elements(cg, og, kh, kw, dh, dw, oh, ow):
    """Scratch elements the vector kernels need: forward, the frames and an output block;
    backward, :func:`samples_per_gradient` samples' frames and output-gradient rows, an
    input-gradient block and the flipped weight."""
    _, frames, _, _, out, dx, _, dwt, span = _layout_in_python(cg, og, kh, kw, dh, dw, oh, ow)
    m = samples_per_gradient(cg, og, kh, kw, dh, dw, oh, ow)
    return max(frames + out, m * span + dwt + dx + cg * og * kh * kw)


@jit
def shifted_product(a, a_at, lda, rows, src, src_at, nch, ch_step, kh, r_step, kw, s_step, out,
                    out_at, ldo, cols):
    """out[i, j] = sum over k = (ch, r, s) of a[a_at + i*lda + k] *
    src[src_at + ch*ch_step + r*r_step + s*s_step + j], for i < rows rounded up to TILE_ROWS
    (rows past ``rows`` repeat the last one) and j < ``cols`` rounded up to whole tiles; out's
    rows are ``ldo`` apart."""
    nv = simd.lanes(out)
    tn = TILE_VECTORS * nv
    last = rows - 1
    for j0 in range(0, cols, tn):
        for o0 in range(0, rows, TILE_ROWS):
            w0 = a_at + min(o0, last) * lda
            w1 = a_at + min(o0 + 1, last) * lda
            w2 = a_at + min(o0 + 2, last) * lda
            w3 = a_at + min(o0 + 3, last) * lda
            w4 = a_at + min(o0 + 4, last) * lda
            w5 = a_at + min(o0 + 5, last) * lda
            w6 = a_at + min(o0 + 6, last) * lda
            w7 = a_at + min(o0 + 7, last) * lda
            z = simd.zeros(out)
            c00 = c01 = c02 = c10 = c11 = c12 = c20 = c21 = c22 = c30 = c31 = c32 = z
            c40 = c41 = c42 = c50 = c51 = c52 = c60 = c61 = c62 = c70 = c71 = c72 = z
            for ch in range(nch):
                for r in range(kh):
                    k0 = (ch * kh + r) * kw
                    at0 = src_at + ch * ch_step + r * r_step + j0
                    for s in range(kw):
                        k = k0 + s
                        at = at0 + s * s_step
                        b0 = simd.load(src, at)
                        b1 = simd.load(src, at + nv)
                        b2 = simd.load(src, at + 2 * nv)
                        v = simd.splat(a, w0 + k)
                        c00 = simd.fma(v, b0, c00)
                        c01 = simd.fma(v, b1, c01)
                        c02 = simd.fma(v, b2, c02)
                        v = simd.splat(a, w1 + k)
                        c10 = simd.fma(v, b0, c10)
                        c11 = simd.fma(v, b1, c11)
                        c12 = simd.fma(v, b2, c12)
                        v = simd.splat(a, w2 + k)
                        c20 = simd.fma(v, b0, c20)
                        c21 = simd.fma(v, b1, c21)
                        c22 = simd.fma(v, b2, c22)
                        v = simd.splat(a, w3 + k)
                        c30 = simd.fma(v, b0, c30)
                        c31 = simd.fma(v, b1, c31)
                        c32 = simd.fma(v, b2, c32)
                        v = simd.splat(a, w4 + k)
                        c40 = simd.fma(v, b0, c40)
                        c41 = simd.fma(v, b1, c41)
                        c42 = simd.fma(v, b2, c42)
                        v = simd.splat(a, w5 + k)
                        c50 = simd.fma(v, b0, c50)
                        c51 = simd.fma(v, b1, c51)
                        c52 = simd.fma(v, b2, c52)
                        v = simd.splat(a, w6 + k)
                        c60 = simd.fma(v, b0, c60)
                        c61 = simd.fma(v, b1, c61)
                        c62 = simd.fma(v, b2, c62)
                        v = simd.splat(a, w7 + k)
                        c70 = simd.fma(v, b0, c70)
                        c71 = simd.fma(v, b1, c71)
                        c72 = simd.fma(v, b2, c72)
            at = out_at + o0 * ldo + j0
            simd.store(out, at, c00)
            simd.store(out, at + nv, c01)
            simd.store(out, at + 2 * nv, c02)
            at += ldo
            simd.store(out, at, c10)
            simd.store(out, at + nv, c11)
            simd.store(out, at + 2 * nv, c12)
            at += ldo
            simd.store(out, at, c20)
            simd.store(out, at + nv, c21)
            simd.store(out, at + 2 * nv, c22)
            at += ldo
            simd.store(out, at, c30)
            simd.store(out, at + nv, c31)
            simd.store(out, at + 2 * nv, c32)
            at += ldo
            simd.store(out, at, c40)
            simd.store(out, at + nv, c41)
            simd.store(out, at + 2 * nv, c42)
            at += ldo
            simd.store(out, at, c50)
            simd.store(out, at + nv, c51)
            simd.store(out, at + 2 * nv, c52)
            at += ldo
            simd.store(out, at, c60)
            simd.store(out, at + nv, c61)
            simd.store(out, at + 2 * nv, c62)
            at += ldo
            simd.store(out, at, c70)
            simd.store(out, at + nv, c71)
            simd.store(out, at + 2 * nv, c72)


@jit
def transposed_gradient(src, src_at, nch, ch_step, kh, r_step, kw, s_step, gt, gt_at, ldg, cols,
                        samples, src_step, gt_step, out, out_at, ldo, width):
    """out[out_at + k*ldo + o] += sum over samples t and j < cols of
    src[src_at + t*src_step + shift(k) + j] * gt[gt_at + t*gt_step + j*ldg + o], for every
    k = (ch, r, s) and o < width (a multiple of two vectors): the transposed weight gradient of
    :func:`shifted_product`, ``gt`` the output gradient transposed (one row of channels per
    output position). Tiles of 12 k x 2 vectors of o, one broadcast of the frame per k and
    position: the samples and positions reduce in registers, no lanes are summed."""
    nv = simd.lanes(out)
    nk = nch * kh * kw
    rs = kh * kw
    for o0 in range(0, width, 2 * nv):
        for k0 in range(0, nk, 12):
            k = min(k0 + 0, nk - 1)
            s0 = src_at + (k // rs) * ch_step + ((k % rs) // kw) * r_step + (k % kw) * s_step
            k = min(k0 + 1, nk - 1)
            s1 = src_at + (k // rs) * ch_step + ((k % rs) // kw) * r_step + (k % kw) * s_step
            k = min(k0 + 2, nk - 1)
            s2 = src_at + (k // rs) * ch_step + ((k % rs) // kw) * r_step + (k % kw) * s_step
            k = min(k0 + 3, nk - 1)
            s3 = src_at + (k // rs) * ch_step + ((k % rs) // kw) * r_step + (k % kw) * s_step
            k = min(k0 + 4, nk - 1)
            s4 = src_at + (k // rs) * ch_step + ((k % rs) // kw) * r_step + (k % kw) * s_step
            k = min(k0 + 5, nk - 1)
            s5 = src_at + (k // rs) * ch_step + ((k % rs) // kw) * r_step + (k % kw) * s_step
            k = min(k0 + 6, nk - 1)
            s6 = src_at + (k // rs) * ch_step + ((k % rs) // kw) * r_step + (k % kw) * s_step
            k = min(k0 + 7, nk - 1)
            s7 = src_at + (k // rs) * ch_step + ((k % rs) // kw) * r_step + (k % kw) * s_step
            k = min(k0 + 8, nk - 1)
            s8 = src_at + (k // rs) * ch_step + ((k % rs) // kw) * r_step + (k % kw) * s_step
            k = min(k0 + 9, nk - 1)
            s9 = src_at + (k // rs) * ch_step + ((k % rs) // kw) * r_step + (k % kw) * s_step
            k = min(k0 + 10, nk - 1)
            s10 = src_at + (k // rs) * ch_step + ((k % rs) // kw) * r_step + (k % kw) * s_step
            k = min(k0 + 11, nk - 1)
            s11 = src_at + (k // rs) * ch_step + ((k % rs) // kw) * r_step + (k % kw) * s_step
            z = simd.zeros(out)
            a00 = a01 = a10 = a11 = a20 = a21 = a30 = a31 = a40 = a41 = a50 = a51 = z
            a60 = a61 = a70 = a71 = a80 = a81 = a90 = a91 = a100 = a101 = a110 = a111 = z
            for t in range(samples):
                x_t = t * src_step
                g_t = gt_at + t * gt_step + o0
                for j in range(cols):
                    b0 = simd.load(gt, g_t + j * ldg)
                    b1 = simd.load(gt, g_t + j * ldg + nv)
                    v = simd.splat(src, s0 + x_t + j)
                    a00 = simd.fma(v, b0, a00)
                    a01 = simd.fma(v, b1, a01)
                    v = simd.splat(src, s1 + x_t + j)
                    a10 = simd.fma(v, b0, a10)
                    a11 = simd.fma(v, b1, a11)
                    v = simd.splat(src, s2 + x_t + j)
                    a20 = simd.fma(v, b0, a20)
                    a21 = simd.fma(v, b1, a21)
                    v = simd.splat(src, s3 + x_t + j)
                    a30 = simd.fma(v, b0, a30)
                    a31 = simd.fma(v, b1, a31)
                    v = simd.splat(src, s4 + x_t + j)
                    a40 = simd.fma(v, b0, a40)
                    a41 = simd.fma(v, b1, a41)
                    v = simd.splat(src, s5 + x_t + j)
                    a50 = simd.fma(v, b0, a50)
                    a51 = simd.fma(v, b1, a51)
                    v = simd.splat(src, s6 + x_t + j)
                    a60 = simd.fma(v, b0, a60)
                    a61 = simd.fma(v, b1, a61)
                    v = simd.splat(src, s7 + x_t + j)
                    a70 = simd.fma(v, b0, a70)
                    a71 = simd.fma(v, b1, a71)
                    v = simd.splat(src, s8 + x_t + j)
                    a80 = simd.fma(v, b0, a80)
                    a81 = simd.fma(v, b1, a81)
                    v = simd.splat(src, s9 + x_t + j)
                    a90 = simd.fma(v, b0, a90)
                    a91 = simd.fma(v, b1, a91)
                    v = simd.splat(src, s10 + x_t + j)
                    a100 = simd.fma(v, b0, a100)
                    a101 = simd.fma(v, b1, a101)
                    v = simd.splat(src, s11 + x_t + j)
                    a110 = simd.fma(v, b0, a110)
                    a111 = simd.fma(v, b1, a111)
            at = out_at + k0 * ldo + o0
            _add_vectors(out, at + 0 * ldo, nv, a00, a01)
            _add_vectors(out, at + 1 * ldo, nv, a10, a11)
            _add_vectors(out, at + 2 * ldo, nv, a20, a21)
            _add_vectors(out, at + 3 * ldo, nv, a30, a31)
            _add_vectors(out, at + 4 * ldo, nv, a40, a41)
            _add_vectors(out, at + 5 * ldo, nv, a50, a51)
            _add_vectors(out, at + 6 * ldo, nv, a60, a61)
            _add_vectors(out, at + 7 * ldo, nv, a70, a71)
            _add_vectors(out, at + 8 * ldo, nv, a80, a81)
            _add_vectors(out, at + 9 * ldo, nv, a90, a91)
            _add_vectors(out, at + 10 * ldo, nv, a100, a101)
            _add_vectors(out, at + 11 * ldo, nv, a110, a111)


@jit(inline="always")
def _add_vectors(out, at, nv, v0, v1):
    """out[at:at + 2*nv] += (v0, v1)."""
    simd.store(out, at, simd.add(simd.load(out, at), v0))
    simd.store(out, at + nv, simd.add(simd.load(out, at + nv), v1))


@jit
def shifted_gradient(dy, dy_at, ldd, rows, src, src_at, nch, ch_step, kh, r_step, kw, s_step,
                     cols, samples, dy_step, src_step, dw, dw_at, ldw, sums, sums_at):
    """dw[dw_at + i*ldw + k] += sum over samples t and j < cols (a multiple of the lanes) of
    dy[dy_at + t*dy_step + i*ldd + j] * src[src_at + t*src_step + shift(k) + j], for i < rows
    and every k = (ch, r, s): the weight gradient of :func:`shifted_product` for layers with
    few output channels, where :func:`transposed_gradient`'s two vectors of channels would be
    mostly padding. Tiles of 4 channels x 6 k over the positions' lanes, summed once per
    call through ``sums[sums_at:]`` (24 vectors' room)."""
    nv = simd.lanes(dy)
    nk = nch * kh * kw
    rs = kh * kw
    for i0 in range(0, rows, 4):
        d0 = dy_at + min(i0 + 0, rows - 1) * ldd
        d1 = dy_at + min(i0 + 1, rows - 1) * ldd
        d2 = dy_at + min(i0 + 2, rows - 1) * ldd
        d3 = dy_at + min(i0 + 3, rows - 1) * ldd
        for k0 in range(0, nk, 6):
            k = min(k0 + 0, nk - 1)
            s0 = src_at + (k // rs) * ch_step + ((k % rs) // kw) * r_step + (k % kw) * s_step
            k = min(k0 + 1, nk - 1)
            s1 = src_at + (k // rs) * ch_step + ((k % rs) // kw) * r_step + (k % kw) * s_step
            k = min(k0 + 2, nk - 1)
            s2 = src_at + (k // rs) * ch_step + ((k % rs) // kw) * r_step + (k % kw) * s_step
            k = min(k0 + 3, nk - 1)
            s3 = src_at + (k // rs) * ch_step + ((k % rs) // kw) * r_step + (k % kw) * s_step
            k = min(k0 + 4, nk - 1)
            s4 = src_at + (k // rs) * ch_step + ((k % rs) // kw) * r_step + (k % kw) * s_step
            k = min(k0 + 5, nk - 1)
            s5 = src_at + (k // rs) * ch_step + ((k % rs) // kw) * r_step + (k % kw) * s_step
            z = simd.zeros(dy)
            c00 = c01 = c02 = c03 = c04 = c05 = c10 = c11 = c12 = c13 = c14 = c15 = z
            c20 = c21 = c22 = c23 = c24 = c25 = c30 = c31 = c32 = c33 = c34 = c35 = z
            for t in range(samples):
                dy_t = t * dy_step
                src_t = t * src_step
                for j in range(0, cols, nv):
                    x0 = simd.load(src, src_t + s0 + j)
                    x1 = simd.load(src, src_t + s1 + j)
                    x2 = simd.load(src, src_t + s2 + j)
                    x3 = simd.load(src, src_t + s3 + j)
                    x4 = simd.load(src, src_t + s4 + j)
                    x5 = simd.load(src, src_t + s5 + j)
                    g = simd.load(dy, dy_t + d0 + j)
                    c00 = simd.fma(g, x0, c00)
                    c01 = simd.fma(g, x1, c01)
                    c02 = simd.fma(g, x2, c02)
                    c03 = simd.fma(g, x3, c03)
                    c04 = simd.fma(g, x4, c04)
                    c05 = simd.fma(g, x5, c05)
                    g = simd.load(dy, dy_t + d1 + j)
                    c10 = simd.fma(g, x0, c10)
                    c11 = simd.fma(g, x1, c11)
                    c12 = simd.fma(g, x2, c12)
                    c13 = simd.fma(g, x3, c13)
                    c14 = simd.fma(g, x4, c14)
                    c15 = simd.fma(g, x5, c15)
                    g = simd.load(dy, dy_t + d2 + j)
                    c20 = simd.fma(g, x0, c20)
                    c21 = simd.fma(g, x1, c21)
                    c22 = simd.fma(g, x2, c22)
                    c23 = simd.fma(g, x3, c23)
                    c24 = simd.fma(g, x4, c24)
                    c25 = simd.fma(g, x5, c25)
                    g = simd.load(dy, dy_t + d3 + j)
                    c30 = simd.fma(g, x0, c30)
                    c31 = simd.fma(g, x1, c31)
                    c32 = simd.fma(g, x2, c32)
                    c33 = simd.fma(g, x3, c33)
                    c34 = simd.fma(g, x4, c34)
                    c35 = simd.fma(g, x5, c35)
            at = sums_at
            simd.store(sums, at + 0 * nv, c00)
            simd.store(sums, at + 1 * nv, c01)
            simd.store(sums, at + 2 * nv, c02)
            simd.store(sums, at + 3 * nv, c03)
            simd.store(sums, at + 4 * nv, c04)
            simd.store(sums, at + 5 * nv, c05)
            simd.store(sums, at + 6 * nv, c10)
            simd.store(sums, at + 7 * nv, c11)
            simd.store(sums, at + 8 * nv, c12)
            simd.store(sums, at + 9 * nv, c13)
            simd.store(sums, at + 10 * nv, c14)
            simd.store(sums, at + 11 * nv, c15)
            simd.store(sums, at + 12 * nv, c20)
            simd.store(sums, at + 13 * nv, c21)
            simd.store(sums, at + 14 * nv, c22)
            simd.store(sums, at + 15 * nv, c23)
            simd.store(sums, at + 16 * nv, c24)
            simd.store(sums, at + 17 * nv, c25)
            simd.store(sums, at + 18 * nv, c30)
            simd.store(sums, at + 19 * nv, c31)
            simd.store(sums, at + 20 * nv, c32)
            simd.store(sums, at + 21 * nv, c33)
            simd.store(sums, at + 22 * nv, c34)
            simd.store(sums, at + 23 * nv, c35)
            _add_sums(dw, dw_at + i0 * ldw + k0, ldw, min(4, rows - i0), min(6, nk - k0), sums,
                      sums_at, nv)


@jit
def _add_sums(dw, at, ldw, rows, cols, sums, sums_at, nv):
    """dw[at + i*ldw + q] += the sum of the lanes of tile vector (i, q), stored at
    sums[sums_at + (6*i + q)*nv:], for the rows and entries that exist (a clamped tile repeats
    the last one: added once). One loop instead of 24 trees of shuffles: less to compile."""
    for i in range(rows):
        row = view1d(dw, at + i * ldw, cols)
        for q in range(cols):
            lanes = view1d(sums, sums_at + (6 * i + q) * nv, nv)
            total = lanes[0]
            for t in range(1, nv):
                total += lanes[t]
            row[q] += total


@jit
def _to_frames(x, x0, c0, cg, h, w, ph, pw, wp, frame, buf, at):
    """Channels c0..c0+cg of the image at x[x0:] into the frames at buf[at:] (the padding around
    them is zero and stays so)."""
    for c in range(cg):
        for ih in range(h):
            src = view1d(x, x0 + ((c0 + c) * h + ih) * w, w)
            dst = view1d(buf, at + c * frame + (ih + ph) * wp + pw, w)
            for t in range(w):
                dst[t] = src[t]


@jit
def vector_forward(x, w, b, y, has_bias, c, h, ww, o, kh, kw, ph, pw, dh, dw, groups, oh, ow,
                   scratch):
    """y = conv2d(x, w) + b at stride 1 (module doc); scratch per :func:`scratch_elements`."""
    cg = c // groups
    og = o // groups
    k = cg * kh * kw
    wp = ow + (kw - 1) * dw
    frame, frames, _, _, out_size, _, _, _, _ = layout(cg, og, kh, kw, dh, dw, oh, ow)
    if scratch.shape[0] < frames + out_size:
        raise IndexError("conv2d: scratch too small for the vector kernels")
    cols = round_up(oh * wp, MAX_TILE_COLUMNS)
    pq = oh * ow
    n = x.shape[0] // (c * h * ww)
    zero = y.dtype.type(0.0)
    pad = view1d(scratch, 0, frames)
    for t in range(frames):
        pad[t] = zero
    for i in range(n):
        for g in range(groups):
            _to_frames(x, i * c * h * ww, g * cg, cg, h, ww, ph, pw, wp, frame, scratch, 0)
            shifted_product(w, g * og * k, k, og, scratch, 0, cg, frame, kh, dh * wp, kw, dw,
                            scratch, frames, cols, oh * wp)
            for oc in range(og):
                bias = b[g * og + oc] if has_bias else zero
                for p in range(oh):
                    src = view1d(scratch, frames + oc * cols + p * wp, ow)
                    dst = view1d(y, (i * o + g * og + oc) * pq + p * ow, ow)
                    for q in range(ow):
                        dst[q] = src[q] + bias


@jit
def vector_backward(x, w, dy, dx, dwt, need_x, need_w, c, h, ww, o, kh, kw, ph, pw, dh, dw,
                    groups, oh, ow, samples, scratch):
    """dx += and dwt += the gradients of :func:`vector_forward` (each when needed), ``samples``
    at a time (:func:`samples_per_gradient`)."""
    cg = c // groups
    og = o // groups
    k = cg * kh * kw
    kt = og * kh * kw
    wp = ow + (kw - 1) * dw
    frame, frames, grad_row, margin, _, dx_size, ldg, dwt_size, span = layout(
        cg, og, kh, kw, dh, dw, oh, ow)
    gt_at = frames + og * grad_row  # in a sample's span: frames, output gradient, transposed
    dwt_at = samples * span
    dx_at = dwt_at + dwt_size
    wt_at = dx_at + dx_size
    if scratch.shape[0] < wt_at + cg * kt:
        raise IndexError("conv2d: scratch too small for the vector kernels")
    dx_cols = round_up(h * wp, MAX_TILE_COLUMNS)
    width = round_up(og, 2 * simd.lanes(dy))
    # few output channels (the transposed tile's two vectors of channels would be mostly
    # padding) or taps (a first layer's 9: 1.23 against 0.90 ms per batch of 64 reduced along
    # the positions): shifted_gradient
    transposed = og >= 2 * simd.lanes(dy) and k >= GRADIENT_ROWS
    w_cols = round_up(oh * wp, simd.lanes(dy))
    pq = oh * ow
    n = x.shape[0] // (c * h * ww)
    zero = dx.dtype.type(0.0)
    pad = view1d(scratch, 0, dx_at)
    for t in range(dx_at):
        pad[t] = zero
    for g in range(groups):
        if need_x:  # the flipped, transposed weight: wt[c, (oc, r, s)] = w[oc, c, kh-1-r, kw-1-s]
            for oc in range(og):
                for ci in range(cg):
                    for r in range(kh):
                        for s in range(kw):
                            scratch[wt_at + (ci * og + oc) * kh * kw + r * kw + s] = \
                                w[(((g * og + oc) * cg + ci) * kh + kh - 1 - r) * kw + kw - 1 - s]
        for i0 in range(0, n, samples):
            m = min(samples, n - i0)
            for t in range(m):
                i = i0 + t
                if need_x or (need_w and not transposed):
                    for oc in range(og):
                        for p in range(oh):
                            src = view1d(dy, (i * o + g * og + oc) * pq + p * ow, ow)
                            dst = view1d(scratch, t * span + frames + oc * grad_row + margin
                                         + p * wp, ow)
                            for q in range(ow):
                                dst[q] = src[q]
                if need_w:
                    _to_frames(x, i * c * h * ww, g * cg, cg, h, ww, ph, pw, wp, frame, scratch,
                               t * span)
                if need_w and transposed:
                    for p in range(oh):
                        for q in range(ow):
                            row = view1d(scratch, t * span + gt_at + (p * wp + q) * ldg, og)
                            at = (i * o + g * og) * pq + p * ow + q
                            for oc in range(og):
                                row[oc] = dy[at + oc * pq]
            if need_w and transposed:
                transposed_gradient(scratch, 0, cg, frame, kh, dh * wp, kw, dw, scratch, gt_at,
                                    ldg, oh * wp, m, span, span, scratch, dwt_at, ldg, width)
            elif need_w:
                shifted_gradient(scratch, frames + margin, grad_row, og, scratch, 0, cg, frame, kh,
                                 dh * wp, kw, dw, w_cols, m, span, span, dwt, g * og * k, k,
                                 scratch, dwt_at)  # (the transposed sums' room, unused here)
            if not need_x:
                continue
            for t in range(m):
                shifted_product(scratch, wt_at, kt, cg, scratch, t * span + frames + ph * wp, og,
                                grad_row, kh, dh * wp, kw, dw, scratch, dx_at, dx_cols, h * wp)
                for ci in range(cg):
                    for ih in range(h):
                        src = view1d(scratch, dx_at + ci * dx_cols + ih * wp + pw, ww)
                        dst = view1d(dx, (((i0 + t) * c + g * cg + ci) * h + ih) * ww, ww)
                        for q in range(ww):
                            dst[q] += src[q]
        if need_w and transposed:  # the group's sums into dwt, zeroed for the next group
            for oc in range(og):
                dst = view1d(dwt, (g * og + oc) * k, k)
                for kk in range(k):
                    dst[kk] += scratch[dwt_at + kk * ldg + oc]
            sums = view1d(scratch, dwt_at, dwt_size)
            for t in range(dwt_size):
                sums[t] = zero
