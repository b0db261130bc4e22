"""The recurrent family: RNN (tanh / ReLU), LSTM and GRU layers, one direction of one layer at a
time, forward over every step and backpropagation through time in compiled code.

A direction of a layer is recorded as (:mod:`nnjit.nn.recurrent` stacks layers and directions):

* ``RNN_INPUT`` ``[x, W_ih, b_ih]``: ``x`` (B, T, I) projected for every step at once, one
  (B*T, I) x (I, G) product: (B, T, G), G = gates * H.
* ``RNN_STATE`` ``[h0, c0]`` (optional): block ``index`` of the (B, K, H) initial states
  (PyTorch's ``h0[index]``) side by side, (B, 2H) (zeros for an absent ``c0``). It is a copy so
  that the scan is its output's only reader: the scan writes that gradient itself.
* ``RNN_SCAN`` ``[p, W_hh, b_hh]``: the steps, in order or reversed; output (B, T, H). Its
  block (aux0) holds ``kind, T, H, reverse`` and the slots of the initial state (an
  RNN_STATE output, or -1: zeros), the lengths (an integer (B,) tensor, or -1), the values
  saved for the backward, and the final states ``h_n`` and ``c_n`` (outputs the scan writes
  besides its record's; the scan reads their gradients, 0 when nothing reads them). aux1 holds
  the scratch elements its kernels need. With lengths, step t of row b is padding for
  ``t >= lengths[b]``: output 0, state unchanged, no gradient (``pack_padded_sequence``).
* ``RNN_STEP_CAT`` ``[a, b]``: (B, T, F) and (B, T, K) side by side per step, (B, T, F+K): the
  two directions' outputs, and the final states of several layers (T = 1).

A length outside 1..T stops the task with :class:`~nnjit.engine.status.BadInputError` naming
the layer and the value. Kernels: :mod:`nnjit.kernels.recurrent`,
:mod:`nnjit.kernels.recurrent_cells`; references: :mod:`nnjit.ops.recurrent_reference`.
"""

from __future__ import annotations

from nnjit.kernels import recurrent as kr
from nnjit.kernels.dense import dense_backward_bias, dense_backward_input, dense_forward
from nnjit.kernels.views import view2d
from nnjit.ops import recurrent_reference as ref
from nnjit.ops.context import (
    CTX_DENSE_MODE,
    CTX_GRADS,
    CTX_HYPER,
    CTX_RECORDS,
    CTX_ROWS,
    CTX_SCRATCH,
    CTX_SLOTS,
    CTX_TRAINING,
    CTX_VALUES,
    dispatcher,
    report_bad_input,
)
from nnjit.ops.family import OpFamily, register
from nnjit.ops.spec import OpGeometry, OpSpec
from nnjit.tape.arena import S_COLS, S_FLAGS, SLOT_GRAD
from nnjit.tape.records import (
    ACCUMULATE,
    NEEDS_GRAD,
    R_AUX0,
    R_AUX1,
    R_FLAGS,
    R_IN0,
    R_IN1,
    R_IN2,
    R_OUT,
)
from nnjit.tape.slot_views import int_slot_flat, slot_flat, slot_view
from nnjit.tape.tape import Tensor

FIRST_OPCODE = 130
_INPUT, _STATE, _SCAN, _STEP_CAT = range(FIRST_OPCODE, FIRST_OPCODE + 4)
_NEED_A, _NEED_B, _NEED_C = NEEDS_GRAD
_ACC_A, _ACC_B, _ACC_C = ACCUMULATE
KINDS = {"rnn_tanh": kr.RNN_TANH, "rnn_relu": kr.RNN_RELU, "lstm": kr.LSTM, "gru": kr.GRU}
# RNN_SCAN's block, field by field
(SC_KIND, SC_STEPS, SC_HIDDEN, SC_REVERSE, SC_STATE, SC_LENGTHS, SC_SAVED, SC_H_N,
 SC_C_N, SC_PROJ, SC_CARRY_H, SC_CARRY_C, SC_CARRY_COL) = range(13)


def _where(t, default: str) -> str:
    return getattr(getattr(t, "tape", None), "current_owner", "") or default


def _sequence_dims(x, what: str, where: str) -> tuple[int, int]:
    if not isinstance(x, Tensor) or x.is_integer or len(x.dims) != 2:
        raise ValueError(f"{where}: {what} must be a float tensor of shape (batch, steps, "
                         f"features), got {x!r}")
    return int(x.dims[0]), int(x.dims[1])


def rnn_input(x, weight, bias=None):
    """Record ``x`` (B, T, I) ``@ weight.T + bias`` at every step, (B, T, G), as one product
    over the B*T rows (``weight`` (G, I), ``bias`` (G,) or None)."""
    where = _where(x, "rnn_input")
    steps, features = _sequence_dims(x, "the input", where)
    gates = int(weight.rows)
    if weight.cols != features or (bias is not None and bias.cols * int(bias.rows) != gates):
        raise ValueError(f"{where}: rnn_input of {features} features per step takes a weight of "
                         f"shape ({gates}, {features}) and a bias of {gates} values, got "
                         f"{weight.shape} and {None if bias is None else bias.shape}")
    scratch = max(int(x.rows) * steps * max(gates, features), gates * features)
    return x.tape.record(_INPUT, [x, weight, bias], x.rows, steps * gates, aux=(steps, scratch),
                         out_dims=(steps, gates))


def rnn_state(h0, c0=None, *, index: int = 0, hidden: int | None = None, cell: int = 0,
              rows=None):
    """Record ``[h0[:, index] | c0[:, index]]`` (B, W+H) of initial states ``h0`` (B, K, W) and
    ``c0`` (B, K, H) (``c0`` None: zeros); ``hidden`` W, ``cell`` H when it differs (an LSTM's
    projection), else 0. ``rows``: the output's rows when the states are a stateful layer's
    carried ones (R fixed rows: a batch's rows past R start from zeros), else h0's."""
    where = _where(h0, "rnn_state")
    hidden = int(h0.dims[-1] if hidden is None else hidden)
    cell = cell or hidden
    if h0.is_integer or h0.cols % hidden or not 0 <= index < h0.cols // hidden:
        raise ValueError(f"{where}: rnn_state reads block {index} of {hidden} values from an "
                         f"initial state of shape {h0.shape}")
    if c0 is not None and (c0.cols // cell != h0.cols // hidden or c0.cols % cell
                           or c0.is_integer or (rows is None and int(c0.rows) != int(h0.rows))):
        raise ValueError(f"{where}: the initial cell state has shape {c0.shape}, the initial "
                         f"hidden state {h0.shape}: they must hold as many blocks")
    return h0.tape.record(_STATE, [h0, c0], h0.rows if rows is None else rows, hidden + cell,
                          aux=(index * hidden, hidden))


def rnn_scan(p, w_hh, b_hh=None, *, kind: str, reverse: bool = False, state=None, lengths=None,
             w_hr=None, carry=None):
    """Record the steps of a recurrent layer's direction on the input projections ``p``
    (B, T, G) (:func:`rnn_input`): ``kind`` one of :data:`KINDS`, ``w_hh`` (G, H), ``b_hh``
    (G,) or None, ``state`` an :func:`rnn_state` output or None (zeros), ``lengths`` an integer
    (B,) tensor or None; ``w_hr`` (P, H): an LSTM's projection (PyTorch's ``proj_size``), the
    state and outputs then P wide and ``w_hh`` (G, P). It must be read by this scan only: the
    scan writes its gradient. Returns ``(output (B, T, W), h_n (B, W), c_n (B, H) or None)``,
    W = P with a projection, else H. ``carry``: ``(h, c or None, index)``, a stateful layer's
    state buffers (R, K*W) and (R, K*H): every training batch writes its final states into
    their block ``index`` (the first min(B, R) rows), its next batch's initial states."""
    where = _where(p, "rnn_scan")
    code = KINDS[kind]
    width, gates = int(w_hh.cols), int(w_hh.rows)
    hidden = gates // kr.GATES[code]
    if w_hr is not None and (code != kr.LSTM or int(w_hr.rows) != width
                             or int(w_hr.cols) != hidden):
        raise ValueError(f"{where}: a projection is an LSTM's (P, H) weight with P the "
                         f"recurrent weight's {width} columns and H = {hidden}, got "
                         f"{w_hr.shape} for a {kind} scan")
    if (w_hr is None and gates != kr.GATES[code] * width) or p.dims[-1] != gates:
        raise ValueError(f"{where}: a {kind} scan of {hidden} hidden units takes projections "
                         f"of {kr.GATES[code] * hidden} values per step and a recurrent weight "
                         f"({kr.GATES[code] * hidden}, {width}), got {p.shape} and "
                         f"{w_hh.shape}")
    steps = int(p.dims[0])
    tape = p.tape
    if state is not None and (state.cols != width + hidden or int(state.rows) != int(p.rows)):
        raise ValueError(f"{where}: the initial state has shape {state.shape}, expected "
                         f"({int(p.rows)}, {width + hidden}) (an rnn_state output)")
    if lengths is not None and (not lengths.is_integer or lengths.cols != 1
                                or int(lengths.rows) != int(p.rows)):
        raise ValueError(f"{where}: lengths must be an integer tensor of shape "
                         f"({int(p.rows)},), one length per sequence, got {lengths!r}")
    grad = any(t is not None and t.requires_grad for t in (p, w_hh, b_hh, state, w_hr))
    proj = 0 if w_hr is None else width
    h_n = tape.alloc_tensor(p.rows, width, grad)
    h_n.spec.name = f"{where}.h_n"
    c_n = None
    if code == kr.LSTM:
        c_n = tape.alloc_tensor(p.rows, hidden, grad)
        c_n.spec.name = f"{where}.c_n"
    saved = tape.alloc_tensor(p.rows, kr.saved_size(code, steps, hidden, proj))
    saved.spec.name = f"{where}.saved"

    def slot(t):
        return -1 if t is None else t.slot

    block = (code, steps, hidden, 1.0 if reverse else 0.0, slot(state), slot(lengths),
             saved.slot, h_n.slot, slot(c_n), slot(w_hr),
             -1 if carry is None else carry[0].slot,
             -1 if carry is None or carry[1] is None else carry[1].slot,
             0 if carry is None else carry[2] * width)
    scratch = kr.scratch_size(gates, int(p.rows), steps, hidden, proj)
    # (w_hr: a 4th input the record has no column for: its slot is in the block, and listing
    # it makes the tape count this scan as its gradient's writer)
    inputs = [p, w_hh, b_hh] + ([w_hr] if w_hr is not None else [])
    y = tape.record(_SCAN, inputs, p.rows, steps * width, block=block, aux=(scratch,),
                    out_requires_grad=grad, out_dims=(steps, width))
    return y, h_n, c_n


def rnn_step_cat(a, b):
    """Record (B, T, F) and (B, T, K) side by side at every step: (B, T, F + K)."""
    where = _where(a, "rnn_step_cat")
    steps = int(a.dims[0]) if len(a.dims) == 2 else 1
    fa, fb = a.cols // steps, b.cols // steps
    if (a.is_integer or b.is_integer or b.cols != steps * fb or a.cols != steps * fa
            or int(a.rows) != int(b.rows) or (len(b.dims) == 2 and b.dims[0] != steps)):
        raise ValueError(f"{where}: rnn_step_cat joins (batch, steps, features) tensors with "
                         f"the same batch and steps, got {a.shape} and {b.shape}")
    out_dims = (steps, fa + fb) if len(a.dims) == 2 else (fa + fb,)
    return a.tape.record(_STEP_CAT, [a, b], a.rows, a.cols + b.cols, aux=(steps,),
                         out_dims=out_dims)


def bad_length_message(program, i: int) -> str:
    """The first length record ``i`` found outside 1..T (its batch is still loaded)."""
    block = program.nodes[i].aux[0]
    steps = int(program.hyper[block + SC_STEPS])
    lengths = program.integer_view(int(program.hyper[block + SC_LENGTHS])).ravel()
    bad = lengths[(lengths < 1) | (lengths > steps)]
    value = f"{int(bad[0])} is" if bad.size else "a length was"
    return (f"sequence length {value} out of range: lengths must be 1..{steps} (the input has "
            f"{steps} steps)")


# -- the registry's recorders: what the generic op check draws ------------------------------
def _input_op(x, weight, bias=None, *, T: int = 1):
    return rnn_input(x.view(-1, T, x.cols // T), weight, bias)


def _state_op(h0, c0=None, *, H: int = 1, index: int = 0):
    return rnn_state(h0, c0, index=index, hidden=H)


def _scan_op(p, w_hh, b_hh=None, *, T: int = 1, kind: str = "lstm", reverse: int = 0,
             ragged: int = 0):
    lengths = None
    if ragged:  # lengths T, T-1, ..., 1, T, ... (ref.ragged_lengths)
        lengths = p.tape.constant(ref.ragged_lengths(int(p.rows), T), "lengths", integer=True)
    p = p.view(-1, T, p.cols // T)
    return rnn_scan(p, w_hh, b_hh, kind=kind, reverse=bool(reverse), lengths=lengths)[0]


def _step_cat_op(a, b, *, T: int = 1):
    return rnn_step_cat(a.view(-1, T, a.cols // T), b.view(-1, T, b.cols // T))


def _scan_geometry(draw, dims) -> OpGeometry:
    kind = list(KINDS)[draw(0, len(KINDS) - 1)]
    if draw(0, 2) == 0:  # 8 hidden units: the packed product's path in float64 (8 lanes)
        dims = dict(dims, H=8)
    hyper = {"T": dims["T"], "kind": kind, "reverse": draw(0, 1), "ragged": draw(0, 1)}
    return OpGeometry(dict(dims, G=kr.GATES[KINDS[kind]] * dims["H"]), hyper)


def _state_geometry(draw, dims) -> OpGeometry:
    return OpGeometry(dims, {"H": dims["H"], "index": draw(0, dims["K"] - 1)})


SPECS = (
    OpSpec("RNN_INPUT", 3, "(B,T*I),(G,I),(G)?->(B,T*G)", ref.input_projection, _input_op,
           hyper=("T",), sample_hyper={"T": 1}, grad_inputs=(0, 1, 2),
           aux={"aux0": "T: steps", "aux1": "scratch elements the kernels need"},
           scratch=lambda node, slots: node.aux[1]),
    OpSpec("RNN_STATE", 2, "(B,K*H),(B,K*H)?->(B,H+H)", ref.state, _state_op,
           hyper=("H", "index"), sample_hyper={"H": 1, "index": 0}, grad_inputs=(0, 1),
           aux={"aux0": "first column of the block", "aux1": "H: values per block"},
           geometry=_state_geometry),
    OpSpec("RNN_SCAN", 3, "(B,T*G),(G,H),(G)?->(B,T*H)", ref.scan, _scan_op,
           hyper=("T", "kind", "reverse", "ragged"),
           sample_hyper={"T": 1, "kind": "lstm", "reverse": 0, "ragged": 0},
           input_domain=(-1.5, 1.5), grad_inputs=(0, 1, 2), bad_input=bad_length_message,
           aux={"aux0": "block: kind, T, H, reverse, slots of the initial state, lengths, "
                        "saved values, h_n, c_n (module doc)",
                "aux1": "scratch elements the kernels need"},
           scratch=lambda node, slots: node.aux[1], geometry=_scan_geometry),
    OpSpec("RNN_STEP_CAT", 2, "(B,T*F),(B,T*K)->(B,T*F+T*K)", ref.step_cat, _step_cat_op,
           hyper=("T",), sample_hyper={"T": 1}, grad_inputs=(0, 1), aux={"aux0": "T: steps"}),
)


@dispatcher
def _rows_view(buf, slots, s, rows, cols):
    """Slot ``s`` of ``buf`` as a matrix of ``cols`` columns (a (B, T*F) slot as (B*T, F))."""
    flat = slot_flat(buf, slots, s, rows)
    return view2d(flat, 0, flat.size // cols, cols)


@dispatcher
def forward(op, i, ctx):
    handled = FIRST_OPCODE <= op < FIRST_OPCODE + 4
    if handled:
        records = ctx[CTX_RECORDS]
        slots = ctx[CTX_SLOTS]
        values = ctx[CTX_VALUES]
        rows = ctx[CTX_ROWS]
        a = records[i, R_IN0]
        c = records[i, R_IN2]
        out = records[i, R_OUT]
        if op == _INPUT:
            w = slot_view(values, slots, records[i, R_IN1], rows)
            dense_forward(_rows_view(values, slots, a, rows, w.shape[1]), w,
                          slot_flat(values, slots, c if c >= 0 else a, rows),
                          _rows_view(values, slots, out, rows, w.shape[0]), c >= 0,
                          ctx[CTX_DENSE_MODE], ctx[CTX_SCRATCH])
        elif op == _STATE:
            kr.copy_state(slot_view(values, slots, a, rows),
                          slot_view(values, slots, records[i, R_IN1] if records[i, R_IN1] >= 0
                                    else a, rows), records[i, R_IN1] >= 0,
                          records[i, R_AUX0], records[i, R_AUX1],
                          slot_view(values, slots, out, rows))
        elif op == _STEP_CAT:
            kr.step_cat(slot_view(values, slots, a, rows),
                        slot_view(values, slots, records[i, R_IN1], rows),
                        slot_view(values, slots, out, rows), records[i, R_AUX0])
        else:
            _scan_forward(i, ctx)
    return handled


@dispatcher
def _scan_forward(i, ctx):
    records = ctx[CTX_RECORDS]
    slots = ctx[CTX_SLOTS]
    values = ctx[CTX_VALUES]
    hyper = ctx[CTX_HYPER]
    rows = ctx[CTX_ROWS]
    h = records[i, R_AUX0]
    a = records[i, R_IN0]
    c = records[i, R_IN2]
    steps = int(hyper[h + SC_STEPS])
    state = int(hyper[h + SC_STATE])
    lengths = int(hyper[h + SC_LENGTHS])
    h_n = int(hyper[h + SC_H_N])
    c_n = int(hyper[h + SC_C_N])
    proj = int(hyper[h + SC_PROJ])
    length_view = int_slot_flat(values, slots, lengths if lengths >= 0 else a, rows)
    if lengths >= 0 and not kr.lengths_valid(length_view, steps):
        report_bad_input(ctx, i)
    kr.scan_forward(int(hyper[h + SC_KIND]), slot_view(values, slots, a, rows),
                    slot_view(values, slots, records[i, R_IN1], rows),
                    slot_flat(values, slots, c if c >= 0 else a, rows), c >= 0,
                    slot_view(values, slots, state if state >= 0 else a, rows), state >= 0,
                    length_view, lengths >= 0, slot_view(values, slots, records[i, R_OUT], rows),
                    slot_view(values, slots, h_n, rows),
                    slot_view(values, slots, c_n if c_n >= 0 else h_n, rows),
                    slot_flat(values, slots, int(hyper[h + SC_SAVED]), rows), ctx[CTX_SCRATCH],
                    steps, hyper[h + SC_REVERSE] != 0.0,
                    slot_view(values, slots, proj if proj >= 0 else records[i, R_IN1], rows),
                    proj >= 0)
    carry = int(hyper[h + SC_CARRY_H])
    if carry >= 0 and ctx[CTX_TRAINING]:  # a stateful layer: the next batch starts from here
        col = int(hyper[h + SC_CARRY_COL])
        kr.carry_state(slot_view(values, slots, h_n, rows), col,
                       slot_view(values, slots, carry, rows))
        carry_c = int(hyper[h + SC_CARRY_C])
        if carry_c >= 0:
            c_view = slot_view(values, slots, c_n, rows)
            kr.carry_state(c_view, col // slots[h_n, S_COLS] * c_view.shape[1],
                           slot_view(values, slots, carry_c, rows))


@dispatcher
def backward(op, i, ctx):
    handled = FIRST_OPCODE <= op < FIRST_OPCODE + 4
    if handled:
        records = ctx[CTX_RECORDS]
        slots = ctx[CTX_SLOTS]
        values = ctx[CTX_VALUES]
        grads = ctx[CTX_GRADS]
        rows = ctx[CTX_ROWS]
        f = records[i, R_FLAGS]
        a = records[i, R_IN0]
        b = records[i, R_IN1]
        c = records[i, R_IN2]
        out = records[i, R_OUT]
        if op == _INPUT:
            scratch = ctx[CTX_SCRATCH]
            w = slot_view(values, slots, b, rows)
            g, features = w.shape
            dy = _rows_view(grads, slots, out, rows, g)
            if (f & _NEED_A) != 0:
                dx = _rows_view(grads, slots, a, rows, features)
                dense_backward_input(dy, w, dx, view2d(scratch, 0, dx.shape[0], features),
                                     (f & _ACC_A) != 0)
            if (f & _NEED_B) != 0:
                kr.weight_grad(dy, _rows_view(values, slots, a, rows, features),
                               slot_view(grads, slots, b, rows), scratch, (f & _ACC_B) != 0)
            if (f & _NEED_C) != 0:
                dense_backward_bias(dy, slot_flat(grads, slots, c, rows), (f & _ACC_C) != 0)
        elif op == _STATE:
            dout = slot_view(grads, slots, out, rows)
            col = records[i, R_AUX0]
            width = records[i, R_AUX1]
            if (f & _NEED_A) != 0:
                kr.copy_state_grad(dout, 0, width, col, slot_view(grads, slots, a, rows),
                                   (f & _ACC_A) != 0)
            if (f & _NEED_B) != 0:
                cell = dout.shape[1] - width
                kr.copy_state_grad(dout, width, cell, col // width * cell,
                                   slot_view(grads, slots, b, rows), (f & _ACC_B) != 0)
        elif op == _STEP_CAT:
            kr.step_cat_grad(slot_view(grads, slots, out, rows), records[i, R_AUX0],
                             slot_view(grads, slots, a, rows), (f & _NEED_A) != 0,
                             (f & _ACC_A) != 0, slot_view(grads, slots, b, rows),
                             (f & _NEED_B) != 0, (f & _ACC_B) != 0)
        else:
            _scan_backward(i, ctx)
    return handled


@dispatcher
def _scan_backward(i, ctx):
    records = ctx[CTX_RECORDS]
    slots = ctx[CTX_SLOTS]
    values = ctx[CTX_VALUES]
    grads = ctx[CTX_GRADS]
    hyper = ctx[CTX_HYPER]
    rows = ctx[CTX_ROWS]
    f = records[i, R_FLAGS]
    h = records[i, R_AUX0]
    a = records[i, R_IN0]
    c = records[i, R_IN2]
    out = records[i, R_OUT]
    state = int(hyper[h + SC_STATE])
    lengths = int(hyper[h + SC_LENGTHS])
    h_n = int(hyper[h + SC_H_N])
    c_n = int(hyper[h + SC_C_N])
    proj = int(hyper[h + SC_PROJ])
    w_hr = proj if proj >= 0 else records[i, R_IN1]
    need_state = state >= 0 and (slots[state, S_FLAGS] & SLOT_GRAD) != 0
    kr.scan_backward(int(hyper[h + SC_KIND]), slot_view(values, slots, records[i, R_IN1], rows),
                     slot_view(values, slots, out, rows), slot_view(grads, slots, out, rows),
                     slot_view(grads, slots, h_n, rows),
                     slot_view(grads, slots, c_n if c_n >= 0 else h_n, rows),
                     int_slot_flat(values, slots, lengths if lengths >= 0 else a, rows),
                     lengths >= 0, slot_flat(values, slots, int(hyper[h + SC_SAVED]), rows),
                     ctx[CTX_SCRATCH], int(hyper[h + SC_STEPS]), hyper[h + SC_REVERSE] != 0.0,
                     slot_view(grads, slots, a, rows), (f & _NEED_A) != 0, (f & _ACC_A) != 0,
                     slot_view(grads, slots, records[i, R_IN1], rows), (f & _NEED_B) != 0,
                     (f & _ACC_B) != 0, slot_flat(grads, slots, c if c >= 0 else a, rows),
                     c >= 0 and (f & _NEED_C) != 0, (f & _ACC_C) != 0,
                     slot_view(grads, slots, state if state >= 0 else h_n, rows), need_state,
                     slot_view(values, slots, w_hr, rows), proj >= 0,
                     slot_view(grads, slots, w_hr, rows))


FAMILY = register(OpFamily("recurrent", SPECS, forward, backward, first_opcode=FIRST_OPCODE))
