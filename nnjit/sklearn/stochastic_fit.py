"""scikit-learn's stochastic MLP solver ("adam", "sgd"), run as one compiled call.

:func:`fit_stochastic` replaces ``BaseMultilayerPerceptron._fit_stochastic``: it takes the same
inputs (the validated X, the binarized y, the estimator with its initial weights drawn by
scikit-learn's own ``_initialize``), consumes the estimator's ``RandomState`` in scikit-learn's
order (validation split, then one shuffle per epoch), and sets the same fitted attributes. The
epochs themselves (minibatches in scikit-learn's order, forward, loss, backward, scikit-learn's
L2 penalty and optimizer arithmetic, the learning-rate schedule, the validation score and the
no-improvement rule, the best-weights restore) run in the compiled loop, without the GIL.
"""

from __future__ import annotations

import math
import signal
from dataclasses import dataclass

import numpy as np

from nnjit.data.adapt import empty_rows
from nnjit.engine import fields
from nnjit.engine.loop_arrays import StepArrays
from nnjit.engine.run_options import RunOptions
from nnjit.engine.status import TrainingDivergedError
from nnjit.optim.sklearn_flavour import SklearnAdam, SklearnSGD
from nnjit.sklearn.compiled_mlp import CompiledMLP, Structure
from nnjit.sklearn.engine_rows import EngineRows
from nnjit.sklearn.targets import engine_targets, r2_per_half_square
from nnjit.sklearn.warn import warn
from nnjit.train.interrupt import POLL_SECONDS, Worker, in_main_thread
from nnjit.train.run_state import RunState
from nnjit.train.threads import dense_forward_mode, single_threaded_blas

#: The most shuffle-order entries (int64) one compiled call holds: past it (n * max_iter larger),
#: the fit returns to Python every few epochs to draw the next orders (32 MB).
MAX_ORDER_ENTRIES = 1 << 22
#: The epochs whose shuffle orders are drawn at a time (a call of the compiled loop each): an
#: early-stopped fit draws at most this many orders it does not use.
ORDER_EPOCHS = 10
#: Rows x parameters x epochs from which a fit's compiled call runs in a worker thread, so that
#: Ctrl-C is seen during it (about 20 ms of work; a thread costs ~0.1 ms).
THREAD_WORK = 5e7

_NONE = np.zeros(0, dtype=np.float64)


@dataclass
class SolverState:
    """What scikit-learn's optimizer object carries between ``partial_fit`` calls: the current
    learning rate, the steps taken (Adam's t) and the buffers (velocities; Adam's moments), in
    the compiled program's parameter-block order."""

    lr: float
    step: int = 0
    buffers: np.ndarray | None = None


def fit_stochastic(est, X, y, incremental: bool, sample_weight=None) -> None:
    """Train ``est`` (an nnjit.sklearn MLP whose ``coefs_`` are initialised) on the validated
    ``X`` and binarized ``y`` (2-D) for ``max_iter`` epochs, or one with ``incremental``;
    ``sample_weight`` (validated, or None) weights the loss as scikit-learn's."""
    from sklearn.base import is_classifier
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import train_test_split

    dtype = X.dtype
    if not incremental or not isinstance(getattr(est, "_solver_state", None), SolverState):
        est._solver_state = SolverState(lr=float(est.learning_rate_init))
    solver = est._solver_state
    if est.early_stopping and incremental:
        raise ValueError("partial_fit does not support early_stopping=True")
    early_stopping = est.early_stopping
    classifier = is_classifier(est)
    if early_stopping:  # scikit-learn's split, from the same RandomState, in the same order
        stratify = y if classifier and est.n_outputs_ == 1 else None
        arrays = (X, y) if sample_weight is None else (X, y, sample_weight)
        X_train, X_val, y_train, y_val, *weights = train_test_split(
            *arrays, random_state=est._random_state, test_size=est.validation_fraction,
            stratify=stratify)
        w_train, w_val = weights if weights else (None, None)
        if X_val.shape[0] < 2:
            raise ValueError("The validation set is too small. Increase 'validation_fraction' "
                             "or the size of your dataset.")
    else:
        X_train, y_train, X_val, y_val = X, y, None, None
        w_train = w_val = sample_weight
    n = X_train.shape[0]
    if est.batch_size == "auto":
        batch_size = min(200, n)
    else:
        if est.batch_size > n:
            warn("Got `batch_size` less than 1 or larger than sample size. It is going to be "
                 "clipped")
        batch_size = int(np.clip(est.batch_size, 1, n))
    epochs = 1 if incremental else int(est.max_iter)
    out = est.out_activation_

    # The stopping rule: scikit-learn's training-loss rule, or its validation score (accuracy;
    # for a regressor R^2, an affine function of the validation loss: its tol is rescaled).
    # The best value so far carries over from earlier fits (warm start, partial_fit), as
    # scikit-learn's best_loss_ / best_validation_score_ do (None: none yet).
    # A classifier of one class scores 1.0 on every validation set (its predict knows one
    # label): the epochs and the best one follow from scikit-learn's rule alone (_one_class).
    tol, monitor, r2_scale = float(est.tol), fields.MONITOR_TRAIN_LOSS, 0.0
    best_score = getattr(est, "best_validation_score_", None)  # (None: weights set by hand)
    one_class = early_stopping and classifier and len(est.classes_) == 1
    if one_class:
        epochs, one_class_count = _one_class(est, best_score, epochs)
        monitor, tol, best = fields.MONITOR_VAL_LOSS, 0.0, math.inf
        X_val, y_val = X_val[:0], y_val[:0]  # (no validation batches: see _one_class)
        w_val = None if w_val is None else w_val[:0]
    elif early_stopping and classifier:
        monitor = fields.MONITOR_VAL_ACCURACY
        best = -math.inf if best_score is None else best_score
    elif early_stopping:
        monitor, r2_scale = fields.MONITOR_VAL_LOSS, r2_per_half_square(y_val, w_val)
        tol = tol / r2_scale if r2_scale > 0 else math.inf
        best = (math.inf if best_score is None or best_score == -math.inf
                else (1.0 - best_score) / r2_scale)
    else:
        best_loss = getattr(est, "best_loss_", None)
        best = math.inf if best_loss is None else best_loss

    optimizer = (SklearnAdam(est.learning_rate_init, est.beta_1, est.beta_2, est.epsilon)
                 if est.solver == "adam" else
                 SklearnSGD(est.learning_rate_init, est.momentum, est.nesterovs_momentum))
    schedule = est.learning_rate if est.solver == "sgd" else "constant"
    lr_table = _NONE
    n_batches = -(-n // batch_size)
    if schedule == "invscaling":  # the rate of epoch e >= 1 follows t_ after epoch e - 1
        rates = [solver.lr] + [float(est.learning_rate_init) / (est.t_ + e * n + 1) ** est.power_t
                               for e in range(1, epochs)]
        lr_table = np.repeat(np.array(rates, dtype=np.float64), n_batches)

    # The fitted network's layers, as scikit-learn's forward pass reads coefs_ (a warm start
    # after a change of hidden_layer_sizes goes on training the fitted network, as there).
    units = [est.coefs_[0].shape[0], *(c.shape[1] for c in est.coefs_)]
    rows = EngineRows(X_train, X_val if early_stopping else None, dtype)
    X_train, X_val = rows.X, rows.X_val
    structure = Structure(tuple(int(u) for u in units), est.activation, out, dtype, batch_size,
                          sample_weight is not None, rows.sparse)
    Y_train = engine_targets(y_train, out, dtype, w_train)
    if early_stopping:
        Y_val = engine_targets(y_val, out, dtype, w_val)
    else:
        Y_val = empty_rows(dtype, Y_train.shape[1])
    orders = _ShuffleOrders(est._random_state, n, epochs) if est.shuffle else None
    perm = orders.table if orders is not None else np.arange(n, dtype=np.int64)

    options = RunOptions(
        task=fields.TASK_FIT, batch=batch_size, eval_batch=batch_size,
        shuffle=fields.SHUFFLE_GIVEN if orders is not None else fields.SHUFFLE_OFF,
        tol=tol, patience=math.inf if one_class else est.n_iter_no_change,  # (inf: never stop)
        monitor=monitor, restore_best=early_stopping, epochs=epochs,
        chunk=orders.chunk if orders is not None else 0, optimizer=optimizer.kind,
        reg_coef=est.alpha, reg_per_batch=True,  # scikit-learn's alpha: divided by the batch size
        plateau=(fields.PLATEAU_SKLEARN_ADAPTIVE if schedule == "adaptive"
                 else fields.PLATEAU_OFF),
        dense_mode=dense_forward_mode())

    state = RunState()
    state.start_fit(step=solver.step, lr=solver.lr, maximize=monitor == fields.MONITOR_VAL_ACCURACY,
                    initial_epoch=0, fit_step=0)
    row = state.row
    row[fields.ST_BEST] = best
    row[fields.ST_BAD_EPOCHS] = getattr(est, "_no_improvement_count", 0)
    # (warm start, partial_fit): a best value from before
    carried = math.isfinite(best) or (one_class and best_score not in (None, -math.inf))
    row[fields.ST_BEST_EPOCH] = 0 if carried else -1
    history = np.zeros((epochs, len(fields.HISTORY_COLUMNS)), dtype=np.float64)

    net = CompiledMLP(structure)  # (a program-cache hit after the structure's first fit)
    rows.bind(net)
    program = net.program
    n_trainable = program.n_trainable
    buffers = solver.buffers
    if buffers is None or buffers.shape != (2, n_trainable) or buffers.dtype != dtype:
        buffers = np.zeros((2, n_trainable), dtype=dtype)
        row[fields.ST_STEP] = 0  # (new buffers: a new optimizer)
    net.load(est.coefs_, est.intercepts_)
    if carried:
        net.best[:] = program.params
    step = StepArrays(optimizer.hyper_vector(), buffers, net.reg_spans, lr_table, _NONE,
                      empty_rows(dtype, None))
    initial = [w.copy() for w in (*est.coefs_, *est.intercepts_)] if early_stopping else None
    interrupt = _Interrupt(row, threaded=n * program.n_params * epochs >= THREAD_WORK)
    diverged = None
    try:
        with single_threaded_blas():
            interrupt.run(lambda: program.run(
                options, (X_train, Y_train, X_val, Y_val, perm), step, row, net.best, history,
                empty_rows(dtype, 1), on_pause=orders.refill if orders is not None else None))
    except TrainingDivergedError as e:
        if not early_stopping:
            raise ValueError(f"Solver produced non-finite parameter weights. The input data may "
                             f"contain large values and need to be preprocessed. ({e})") from e
        diverged = e  # scikit-learn goes on with NaN weights and scores, then restores the best
    finally:
        net.store(est.coefs_, est.intercepts_)
    if early_stopping and not row[fields.ST_RESTORED] and (
            diverged is not None or interrupt.requested) and not carried:
        _put_back(est, initial)  # (no best epoch yet: scikit-learn's best copy is the start)

    done = int(row[fields.ST_EPOCH])
    losses = history[:done, fields.H_TRAIN_LOSS].tolist()
    if diverged is not None:  # the diverged epoch and every later one: NaN loss and score
        losses += [math.nan] * (epochs - done)
        history = np.vstack([history[:done], np.full((epochs - done, history.shape[1]), np.nan)])
        done = epochs
    if orders is not None:
        orders.finish(done)
    est.n_iter_ = done
    est.t_ += done * n
    est.loss_curve_.extend(losses)
    if done:
        est.loss_ = losses[-1]
    solver.step, solver.buffers = int(row[fields.ST_STEP]), buffers
    if schedule == "adaptive":
        solver.lr = float(row[fields.ST_LR])
    elif schedule == "invscaling" and done:
        solver.lr = float(est.learning_rate_init) / (est.t_ + 1) ** est.power_t
    if early_stopping:
        if one_class:
            scores = [1.0] * done
        elif classifier:
            scores = history[:done, fields.H_VAL_ACC].tolist()
        else:
            scores = (1.0 - r2_scale * history[:done, fields.H_VAL_LOSS]).tolist()
        est.validation_scores_.extend(scores)
        for score in scores:  # scikit-learn's rule for its best score
            if score > est.best_validation_score_:
                est.best_validation_score_ = score
        est._best_coefs, est._best_intercepts = est.coefs_, est.intercepts_  # (restored)
    else:
        for loss in losses:
            if loss < est.best_loss_:
                est.best_loss_ = loss
    est._no_improvement_count = int(row[fields.ST_BAD_EPOCHS])
    stopped = row[fields.ST_STOPPED] == 1.0
    if one_class:
        est._no_improvement_count = one_class_count
        stopped = done < est.max_iter
    elif diverged is not None:
        est._no_improvement_count = 0  # (NaN scores never count as "no improvement")
    if est.verbose:
        _report(est, losses, est.validation_scores_[-done:] if early_stopping else None,
                stopped)
    if interrupt.requested:
        warn("Training interrupted by user.")
    elif not incremental and not stopped and done == est.max_iter:
        warn(f"Stochastic Optimizer: Maximum iterations ({est.max_iter}) reached and the "
             "optimization hasn't converged yet.", ConvergenceWarning)


def _one_class(est, best_score, epochs: int) -> tuple[int, int]:
    """(epochs, no-improvement count) of an early-stopping fit of one class: scikit-learn's
    rule on validation scores that are all 1.0. The compiled fit then runs that many epochs
    with no validation batches, monitoring the (NaN) validation loss: only the first epoch
    "improves" on no best, so its weights are the ones restored, as scikit-learn's."""
    best = -math.inf if best_score is None else best_score
    count = getattr(est, "_no_improvement_count", 0)
    for epoch in range(1, epochs + 1):
        count = count + 1 if 1.0 < best + est.tol else 0
        best = max(best, 1.0)
        if count > est.n_iter_no_change:
            return epoch, count
    return epochs, count


def _put_back(est, weights) -> None:
    """Copy ``weights`` (coefs_ then intercepts_) back into the estimator's arrays."""
    for mine, saved in zip((*est.coefs_, *est.intercepts_), weights):
        mine[...] = saved


class _Interrupt:
    """Ctrl-C during a fit, as scikit-learn's: the running epoch stops before its next batch
    (the ``STOP_NOW`` request the compiled loop reads before every job), the fit keeps the
    epochs done and warns "Training interrupted by user.". The compiled call runs in a worker
    thread while the main thread waits for SIGINT when it may be long (``threaded``); a short
    one runs directly (a Ctrl-C during it is seen when it returns: the fit is complete)."""

    def __init__(self, row: np.ndarray, threaded: bool):
        self.row, self.threaded, self.requested = row, threaded, False

    def _handler(self, signum, frame) -> None:
        self.requested = True
        self.row[fields.ST_STOPPED] = fields.STOP_NOW

    def run(self, call) -> None:
        if not in_main_thread() or signal.getsignal(signal.SIGINT) is not \
                signal.default_int_handler:
            call()  # (another thread, or the caller's own SIGINT handler: left alone)
            return
        previous = signal.signal(signal.SIGINT, self._handler)
        try:
            if not self.threaded:
                call()
                return
            worker = Worker(call)
            worker.start()
            while not worker.done.wait(POLL_SECONDS):
                pass
            try:
                worker.result()
            except KeyboardInterrupt:  # (the loop's INTERRUPTED status: the stop we asked)
                if not self.requested:
                    raise
        except KeyboardInterrupt:
            if not self.requested:
                raise
        finally:
            signal.signal(signal.SIGINT, previous)


def _report(est, losses, scores, stopped: bool) -> None:
    """scikit-learn's ``verbose`` lines, printed after the compiled fit."""
    start = est.n_iter_ - len(losses)
    for k, loss in enumerate(losses):
        print("Iteration %d, loss = %.8f" % (start + k + 1, loss))
        if scores is not None:
            print("Validation score: %f" % scores[k])
    if stopped:
        what = "Validation score" if scores is not None else "Training loss"
        print(f"{what} did not improve more than tol={est.tol:f} for {est.n_iter_no_change} "
              "consecutive epochs. Stopping.")


class _ShuffleOrders:
    """scikit-learn's batch order of every epoch: ``sample_idx = shuffle(sample_idx,
    random_state)`` (its ``resample``: ``random_state.shuffle(arange(n))``, then indexing), drawn
    from the estimator's RandomState in its order, written into the table the compiled loop
    reads (``SHUFFLE_GIVEN``): n working entries, then ``held`` orders.

    The orders are drawn ``held`` epochs at a time (:data:`ORDER_EPOCHS`, fewer when n is
    large), not all ``max_iter`` up front: a fit that stops early would pay for draws it never
    uses. ``chunk``: 0 when every epoch's order fits the table (one compiled call); else the
    epochs per call, and :meth:`refill` (the run's pause hook) draws the next ones between
    calls. :meth:`finish` then leaves the RandomState where scikit-learn's fit leaves it.
    """

    def __init__(self, random_state, n: int, epochs: int):
        self.random_state, self.n, self.epochs = random_state, n, epochs
        self.held = held = max(1, min(epochs, ORDER_EPOCHS, MAX_ORDER_ENTRIES // n))
        self.chunk = 0 if held >= epochs else held
        self.table = np.empty((held + 1) * n, dtype=np.int64)
        self.sample_idx = np.arange(n, dtype=np.int64)
        self.next_epoch = 0
        self._before = None  # (RandomState state, sample_idx, epoch) before the last draws
        self.refill()

    def _draw(self) -> np.ndarray:
        """The next epoch's order (the RandomState advances as scikit-learn's does)."""
        indices = np.arange(self.n)
        self.random_state.shuffle(indices)
        self.sample_idx = self.sample_idx[indices]
        return self.sample_idx

    def refill(self) -> bool:
        """Draw the orders of the next ``held`` epochs (fewer at the end); True: go on."""
        n, held = self.n, self.held
        stop = min(self.next_epoch + held, self.epochs)
        if stop > self.next_epoch:
            self._before = (self.random_state.get_state(), self.sample_idx, self.next_epoch)
        for epoch in range(self.next_epoch, stop):
            at = (epoch % held + 1) * n
            self.table[at : at + n] = self._draw()
        self.next_epoch = stop
        return True

    def finish(self, epochs: int) -> None:
        """Leave the RandomState as scikit-learn's fit of ``epochs`` epochs leaves it (one draw
        per epoch): the orders of epochs the fit never ran are taken back, those of epochs it
        ran without drawing (scikit-learn's fit goes on after a divergence) drawn. The global
        RandomState (``random_state=None``) is never set back: other code may draw from it."""
        if epochs < self.next_epoch and self._before is not None and (
                self.random_state is not np.random.mtrand._rand):
            state, sample_idx, start = self._before
            if epochs >= start:
                self.random_state.set_state(state)
                self.sample_idx, self.next_epoch = sample_idx, start
        while self.next_epoch < epochs:
            self._draw()
            self.next_epoch += 1
