"""2-D pooling kernels over NCHW rows: max, average and adaptive average.

A batch slot of images (B, C*H*W) is ``planes = B * C`` planes of ``H * W`` values, row-major;
the output holds ``planes`` planes of ``OH * OW``. Every window is clipped to the image before
its loop (no per-element bounds test): padding never holds a value, it only shifts the windows
(max pooling's padding counts as -inf, average pooling's as zeros in the divisor when
``count_include_pad``). Backwards overwrite the input gradient when they are its first writer
(``accumulate`` False: zeroed first, as overlapping windows add into it) and add otherwise.
"""

import numpy as np

from nnjit.kernels._jit import jit
from nnjit.kernels.views import view1d


@jit(inline="always")
def first_tap(start, dilation):
    """The first tap ``j`` whose position ``start + j * dilation`` is >= 0."""
    return 0 if start >= 0 else (dilation - 1 - start) // dilation


@jit(inline="always")
def end_tap(start, dilation, taps, size):
    """One past the last tap ``j < taps`` whose position ``start + j * dilation`` is < size."""
    if start >= size:
        return 0
    return min(taps, (size - start + dilation - 1) // dilation)


@jit(inline="always")
def take_max(v, k, best, where):
    """(best, where) after tap value ``v`` at position ``k``: a larger value or a NaN wins, a
    tie keeps the earlier tap. Positions are floats of the value's dtype so that both updates
    are selects (an int position made LLVM branch, ~4x slower on unordered data)."""
    t = (v > best) | (v != v) | (where < 0)
    return (v if t else best), (k if t else where)


@jit(inline="always")
def relu_of_max(best, where, relu, zero, none):
    """(value, position) of a window's max, followed by a ReLU when ``relu``: a max that is not
    positive becomes 0 (a NaN stays) and routes no gradient (position -1), exactly as a ReLU
    before the pool would (it is monotonic: the max of the ReLUs is the ReLU of the max)."""
    if relu and not best > zero:
        return (best if best != best else zero), none
    return best, where


@jit
def maxpool2d_forward(x, y, argmax, planes, H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, relu):
    """y = the max of each window; ``argmax`` (y's shape) gets its position in the plane
    (h * W + w, as a float: exact below 2**24 values per plane; -1 for a window wholly in the
    padding, whose max is -inf). Ties go to the first maximum in row-major window order and a
    NaN wins, as PyTorch's CPU kernel. ``relu``: a ReLU follows (:func:`relu_of_max`)."""
    if is_plain_2x2(H, W, OH, OW, kh, kw, sh, sw, ph, pw) and dh == 1 and dw == 1:
        maxpool2x2_forward(x, y, argmax, planes, H, W, OH, OW, relu)
        return
    lowest = x.dtype.type(-np.inf)
    none = x.dtype.type(-1.0)
    zero = x.dtype.type(0.0)
    for p in range(planes):
        xo = p * H * W
        yo = p * OH * OW
        for oh in range(OH):
            h0 = oh * sh - ph
            a_lo = first_tap(h0, dh)
            a_hi = end_tap(h0, dh, kh, H)
            for ow in range(OW):
                w0 = ow * sw - pw
                if w0 >= 0 and w0 + (kw - 1) * dw < W:  # inside: no divisions
                    b_lo = 0
                    b_hi = kw
                else:
                    b_lo = first_tap(w0, dw)
                    b_hi = end_tap(w0, dw, kw, W)
                best = lowest
                where = none
                for a in range(a_lo, a_hi):
                    row = (h0 + a * dh) * W + w0
                    for b in range(b_lo, b_hi):
                        k = row + b * dw
                        best, where = take_max(x[xo + k], x.dtype.type(k), best, where)
                best, where = relu_of_max(best, where, relu, zero, none)
                y[yo + oh * OW + ow] = best
                argmax[yo + oh * OW + ow] = where


@jit
def maxpool2x2_forward(x, y, argmax, planes, H, W, OH, OW, relu):
    """:func:`maxpool2d_forward` for 2x2 windows at stride 2 without padding (most CNNs' pool).

    The taps are compared in pairs, (top left, top right) and (bottom left, bottom right), then
    the two winners: the result of :func:`take_max` over the four in order (first maximum, a
    later NaN wins) with more independent work per step, in one loop per output row over views
    of its two input rows, which LLVM vectorises (about 3x faster than a scalar scan)."""
    zero = x.dtype.type(0.0)
    one = x.dtype.type(1.0)
    none = x.dtype.type(-1.0)
    below = x.dtype.type(W)  # offsets of the taps below and below right, in the dtype
    below_right = x.dtype.type(W + 1)
    for p in range(planes):
        for oh in range(OH):
            r = 2 * oh * W
            top = view1d(x, p * H * W + r, 2 * OW)
            bottom = view1d(x, p * H * W + r + W, 2 * OW)
            yv = view1d(y, (p * OH + oh) * OW, OW)
            av = view1d(argmax, (p * OH + oh) * OW, OW)
            row = x.dtype.type(r)
            for ow in range(OW):
                at = row + x.dtype.type(2 * ow)
                a, b = top[2 * ow], top[2 * ow + 1]
                c, d = bottom[2 * ow], bottom[2 * ow + 1]
                right = (b > a) | (b != b)
                upper = b if right else a
                upper_at = one if right else zero
                right = (d > c) | (d != d)
                lower = d if right else c
                lower_at = below_right if right else below
                down = (lower > upper) | (lower != lower)
                best, where = relu_of_max(lower if down else upper,
                                          at + (lower_at if down else upper_at), relu, zero,
                                          none)
                yv[ow] = best
                av[ow] = where


@jit
def maxpool2d_backward(dy, argmax, dx, planes, HW, OHW, accumulate):
    """dx (+)= dy routed to each window's argmax (the forward's)."""
    if not accumulate:
        for k in range(planes * HW):
            dx[k] = 0
    for p in range(planes):
        xo = p * HW
        yo = p * OHW
        for o in range(OHW):
            k = int(argmax[yo + o])
            if k >= 0:
                dx[xo + k] += dy[yo + o]


@jit(inline="always")
def avg_window(o, stride, pad, kernel, size):
    """(start, end, padded extent) of window ``o`` along one axis, clipped to the image; the
    extent counts the padding inside it (what ``count_include_pad`` divides by)."""
    start = o * stride - pad
    end = min(start + kernel, size + pad)
    extent = end - start
    return max(start, 0), min(end, size), extent


@jit
def avgpool2d_forward(x, y, planes, H, W, OH, OW, kh, kw, sh, sw, ph, pw, count_include_pad,
                      divisor_override):
    """y = the mean of each window: divided by ``divisor_override`` when > 0, else by the window
    with its padding (``count_include_pad``) or without it (PyTorch's rules; an empty window
    gives 0)."""
    if is_plain_2x2(H, W, OH, OW, kh, kw, sh, sw, ph, pw):
        avgpool2x2_forward(x, y, planes, H, W, OH, OW, 4 if divisor_override <= 0
                           else divisor_override)
        return
    zero = x.dtype.type(0.0)
    for p in range(planes):
        xo = p * H * W
        yo = p * OH * OW
        for oh in range(OH):
            h_lo, h_hi, h_ext = avg_window(oh, sh, ph, kh, H)
            for ow in range(OW):
                w_lo, w_hi, w_ext = avg_window(ow, sw, pw, kw, W)
                total = zero
                for h in range(h_lo, h_hi):
                    row = xo + h * W
                    for w in range(w_lo, w_hi):
                        total += x[row + w]
                if divisor_override > 0:
                    divisor = divisor_override
                elif count_include_pad:
                    divisor = h_ext * w_ext
                else:
                    divisor = (h_hi - h_lo) * (w_hi - w_lo)
                y[yo + oh * OW + ow] = total / x.dtype.type(divisor) if divisor > 0 else zero


@jit
def avgpool2d_backward(dy, dx, planes, H, W, OH, OW, kh, kw, sh, sw, ph, pw, count_include_pad,
                       divisor_override, accumulate):
    """dx (+)= each window's dy / divisor spread over the window (the forward's divisors)."""
    if is_plain_2x2(H, W, OH, OW, kh, kw, sh, sw, ph, pw) and (accumulate or (
            H == 2 * OH and W == 2 * OW)):
        avgpool2x2_backward(dy, dx, planes, H, W, OH, OW, 4 if divisor_override <= 0
                            else divisor_override, accumulate)
        return
    if not accumulate:
        for k in range(planes * H * W):
            dx[k] = 0
    for p in range(planes):
        xo = p * H * W
        yo = p * OH * OW
        for oh in range(OH):
            h_lo, h_hi, h_ext = avg_window(oh, sh, ph, kh, H)
            for ow in range(OW):
                w_lo, w_hi, w_ext = avg_window(ow, sw, pw, kw, W)
                if divisor_override > 0:
                    divisor = divisor_override
                elif count_include_pad:
                    divisor = h_ext * w_ext
                else:
                    divisor = (h_hi - h_lo) * (w_hi - w_lo)
                if divisor <= 0:
                    continue
                g = dy[yo + oh * OW + ow] / dy.dtype.type(divisor)
                for h in range(h_lo, h_hi):
                    row = xo + h * W
                    for w in range(w_lo, w_hi):
                        dx[row + w] += g


@jit
def maxpool2x2_backward(dy, argmax, dx, planes, H, W, OH, OW, accumulate):
    """:func:`maxpool2d_backward` for the windows of :func:`maxpool2x2_forward`: each window's
    four input positions are written in one pass (dy at its argmax, 0 elsewhere, or added when
    ``accumulate``), with no pass zeroing the whole input gradient first; rows and columns no
    window covers (an odd side) are zeroed (or left, when accumulating)."""
    zero = dx.dtype.type(0.0)
    one = dx.dtype.type(1.0)
    below = dx.dtype.type(W)
    below_right = dx.dtype.type(W + 1)
    for p in range(planes):
        for oh in range(OH):
            r = 2 * oh * W
            top = view1d(dx, p * H * W + r, 2 * OW)
            bottom = view1d(dx, p * H * W + r + W, 2 * OW)
            gv = view1d(dy, (p * OH + oh) * OW, OW)
            av = view1d(argmax, (p * OH + oh) * OW, OW)
            row = dx.dtype.type(r)
            for ow in range(OW):
                at = av[ow] - (row + dx.dtype.type(2 * ow))  # 0, 1, W, W+1, or < 0: none
                g = gv[ow]
                a = g if at == zero else zero
                b = g if at == one else zero
                c = g if at == below else zero
                d = g if at == below_right else zero
                if accumulate:
                    top[2 * ow] += a
                    top[2 * ow + 1] += b
                    bottom[2 * ow] += c
                    bottom[2 * ow + 1] += d
                else:
                    top[2 * ow] = a
                    top[2 * ow + 1] = b
                    bottom[2 * ow] = c
                    bottom[2 * ow + 1] = d
            if not accumulate:
                for q in range(2 * OW, W):
                    dx[p * H * W + r + q] = zero
                    dx[p * H * W + r + W + q] = zero
        if not accumulate:
            for k in range(2 * OH * W, H * W):
                dx[p * H * W + k] = zero


@jit(inline="always")
def is_plain_2x2(H, W, OH, OW, kh, kw, sh, sw, ph, pw):
    """2x2 windows at stride 2 without padding, all inside the image (no ceil_mode window)."""
    return (kh == 2 and kw == 2 and sh == 2 and sw == 2 and ph == 0 and pw == 0
            and 2 * OH <= H and 2 * OW <= W)


@jit(inline="always")
def avgpool2x2_forward(x, y, planes, H, W, OH, OW, divisor):
    """:func:`avgpool2d_forward` of plain 2x2 windows (:func:`is_plain_2x2`)."""
    scale = x.dtype.type(1.0) / x.dtype.type(divisor)
    for p in range(planes):
        xo = p * H * W
        yo = p * OH * OW
        for oh in range(OH):
            r = xo + 2 * oh * W
            for ow in range(OW):
                k = r + 2 * ow
                y[yo + oh * OW + ow] = (x[k] + x[k + 1] + x[k + W] + x[k + W + 1]) * scale


@jit(inline="always")
def avgpool2x2_backward(dy, dx, planes, H, W, OH, OW, divisor, accumulate):
    """:func:`avgpool2d_backward` of plain 2x2 windows that tile the image (or accumulating)."""
    scale = dy.dtype.type(1.0) / dy.dtype.type(divisor)
    for p in range(planes):
        xo = p * H * W
        yo = p * OH * OW
        for oh in range(OH):
            r = xo + 2 * oh * W
            for ow in range(OW):
                k = r + 2 * ow
                g = dy[yo + oh * OW + ow] * scale
                if accumulate:
                    dx[k] += g
                    dx[k + 1] += g
                    dx[k + W] += g
                    dx[k + W + 1] += g
                else:
                    dx[k] = g
                    dx[k + 1] = g
                    dx[k + W] = g
                    dx[k + W + 1] = g


@jit(inline="always")
def adaptive_window(o, out_size, in_size):
    """PyTorch's adaptive window ``[floor(o * in / out), ceil((o + 1) * in / out))``."""
    return (o * in_size) // out_size, ((o + 1) * in_size + out_size - 1) // out_size


@jit
def adaptive_avgpool2d_forward(x, y, planes, H, W, OH, OW):
    """y = the mean of each adaptive window (OH = OW = 1: the global average pool)."""
    zero = x.dtype.type(0.0)
    for p in range(planes):
        xo = p * H * W
        yo = p * OH * OW
        for oh in range(OH):
            h_lo, h_hi = adaptive_window(oh, OH, H)
            for ow in range(OW):
                w_lo, w_hi = adaptive_window(ow, OW, W)
                total = zero
                for h in range(h_lo, h_hi):
                    row = xo + h * W
                    for w in range(w_lo, w_hi):
                        total += x[row + w]
                y[yo + oh * OW + ow] = total / x.dtype.type((h_hi - h_lo) * (w_hi - w_lo))


@jit
def adaptive_avgpool2d_backward(dy, dx, planes, H, W, OH, OW, accumulate):
    """dx (+)= each adaptive window's dy / its size, spread over the window."""
    if not accumulate:
        for k in range(planes * H * W):
            dx[k] = 0
    for p in range(planes):
        xo = p * H * W
        yo = p * OH * OW
        for oh in range(OH):
            h_lo, h_hi = adaptive_window(oh, OH, H)
            for ow in range(OW):
                w_lo, w_hi = adaptive_window(ow, OW, W)
                g = dy[yo + oh * OW + ow] / dy.dtype.type((h_hi - h_lo) * (w_hi - w_lo))
                for h in range(h_lo, h_hi):
                    row = xo + h * W
                    for w in range(w_lo, w_hi):
                        dx[row + w] += g
