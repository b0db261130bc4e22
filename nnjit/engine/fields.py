"""The compiled loop's rows and vectors, field by field: the program layout vector, the run
configuration, the run state, the history columns, tasks and stop requests.

Python reads and writes them through these names (``nnjit.train.run_state`` gives named views of
the state row; :class:`nnjit.engine.run_options.RunOptions` writes the config row); the compiled
loop reads the same constants.
"""

from nnjit.kernels.optim import (  # noqa: F401  (C_OPT_KIND values)
    OPT_ADADELTA,
    OPT_ADAGRAD,
    OPT_ADAM,
    OPT_ADAMAX,
    OPT_NADAM,
    OPT_RADAM,
    OPT_RMSPROP,
    OPT_SGD,
    OPT_SKLEARN_ADAM,
    OPT_SKLEARN_SGD,
)

# Tasks.
TASK_FIT, TASK_EVALUATE, TASK_PREDICT, TASK_GRADIENT = 0, 1, 2, 3

# Program layout vector (int64): where a program's inputs, target and output live, and its sizes.
# Written once, when the Program is built, and never again: a run's options are in the config
# row. L_INPUT is the first input's slot; a model with several inputs (``forward(self, x_num,
# x_cat)``) has L_N_INPUTS entries after the head, one per input: (slot, first column of the
# input in the packed X matrix, columns).
(
    L_INPUT,
    L_TARGET,
    L_OUTPUT,
    L_LOSS_OP,
    L_N_PARAMS,
    L_SCRATCH,
    L_MAX_BATCH,
    L_N_INPUTS,
    L_N_TRAINABLE,  # the parameter block's trainable head; buffers (running statistics) follow
) = range(9)
LAYOUT_HEAD = 9
INPUT_ENTRY_WIDTH = 3
INPUT_SLOT, INPUT_FIRST_COLUMN, INPUT_COLUMNS = range(INPUT_ENTRY_WIDTH)
LAYOUT_WIDTH = LAYOUT_HEAD + INPUT_ENTRY_WIDTH  # with one input

# Run configuration (float64): one run's options, written by
# nnjit.engine.run_options.RunOptions.config_row() alone; the compiled code only reads it.
(
    C_BATCH,
    C_EVAL_BATCH,
    C_SHUFFLE,
    C_DROP_LAST,
    C_TOL,
    C_PATIENCE,
    C_MONITOR,
    C_RESTORE_BEST,
    C_EPOCHS,
    C_CHUNK,
    C_OPT_KIND,
    C_REG_COEF,
    C_REG_PER_BATCH,
    C_CLIP_NORM,  # > 0: clip the gradient's global norm to this
    C_ACCUM_STEPS,  # optimizer step every this many minibatches (mean gradient)
    C_PLATEAU,  # 1: ReduceLROnPlateau on the monitored value (params/state in ``plateau``)
    C_DENSE_MODE,  # the BLAS kernels in use: nnjit.kernels.dense.MODE_AVX2 / MODE_AVX512
    # The fit's training-batch augmentation (the augmenting job loader reads them):
    C_AUG_SLOT,  # the input slot that training batches augment (-1: none)
    C_AUG_PAD,  # random crop: zero padding on each side (0: no crop)
    C_AUG_FLIP,  # 1: random horizontal flip
    C_AUG_C,  # the augmented input's (C, H, W)
    C_AUG_H,
    C_AUG_W,
    # A data-parallel fit over MPI (nnjit.distributed; the MPI hooks read them): the handles are
    # this process's MPI handle values (mpi4py's), integers below 2**53, exact in a float64.
    C_MPI_RANKS,  # ranks sharing each global batch (0: not distributed)
    C_MPI_RANK,  # this process's rank
    C_MPI_COMM,  # the communicator
    C_MPI_DATATYPE,  # the arena dtype's MPI datatype (MPI_FLOAT / MPI_DOUBLE)
    C_MPI_DOUBLE,  # MPI_DOUBLE (the epoch's loss sums)
    C_MPI_SUM,  # MPI_SUM
    C_MPI_IN_PLACE,  # MPI_IN_PLACE
) = range(30)
CONFIG_WIDTH = 30

MONITOR_VAL_LOSS, MONITOR_VAL_ACCURACY, MONITOR_TRAIN_LOSS = 0, 1, 2

# C_SHUFFLE values: the rows in order; reshuffled every epoch with the model's RNG; or in the
# order Python gives: ``perm`` holds n working entries, then a table of K orders of n rows, and
# epoch e (counted in the fit) copies order ``e % K`` into the working entries (scikit-learn's
# RandomState shuffles, nnjit.sklearn).
SHUFFLE_OFF, SHUFFLE_RNG, SHUFFLE_GIVEN = 0, 1, 2

# C_PLATEAU values: no rule at the epoch end; ReduceLROnPlateau (``plateau`` holds its params and
# state); scikit-learn's "adaptive" rate: when early stopping would fire, divide the rate by 5
# and go on, unless it is already <= 1e-6.
PLATEAU_OFF, PLATEAU_TORCH, PLATEAU_SKLEARN_ADAPTIVE = 0, 1, 2
#: scikit-learn's floor of the "adaptive" rate: at or below it, no improvement stops the fit.
SKLEARN_ADAPTIVE_MIN_LR = 1e-6

# Run state (float64): every variable that must survive a return to Python.
(
    ST_EPOCH,  # epochs completed
    ST_STEP,  # optimizer steps taken
    ST_BEST,  # best monitored value so far
    ST_BEST_EPOCH,  # epoch (0-based) of the best value, -1 if none
    ST_BAD_EPOCHS,  # consecutive epochs without a tol-sized improvement
    ST_STOPPED,  # 1 once early stopping fired; STOP_AFTER_EPOCH / STOP_NOW: a stop request
    ST_JOB,  # job index in the current epoch / task, -1 before it starts
    ST_DIR,  # 0 between jobs, 1 replaying forward, 2 replaying backward
    ST_CURSOR,  # next record to replay
    ST_ROWS,  # rows of the current batch
    ST_BATCH_LOSS,  # loss sum, correct count and counted rows of the current job
    ST_BATCH_CORRECT,
    ST_BATCH_COUNT,  # rows the loss counted (a graph's masked-out nodes are not counted)
    ST_TRAIN_LOSS,  # sums over the current epoch
    ST_TRAIN_CORRECT,
    ST_TRAIN_N,
    ST_VAL_LOSS,
    ST_VAL_CORRECT,
    ST_VAL_N,
    ST_EPOCH_T0,  # monotonic ns at the start of the epoch
    ST_RESTORED,  # 1 when best weights were restored
    ST_LR,  # learning rate of the next optimizer step
    ST_FIT_STEP,  # optimizer steps taken in this fit (index into the LR table)
    ST_ACCUM_N,  # minibatches accumulated towards the next step
    ST_BAD_RECORD,  # 1 + the first record whose op found bad input data in this job (0: none)
    ST_ALLREDUCE_NS,  # MPI fits: nanoseconds in the gradients' Allreduce so far (waits included)
) = range(26)
STATE_WIDTH = 26

# History columns (float64, one row per epoch).
H_EPOCH, H_TRAIN_LOSS, H_TRAIN_ACC, H_VAL_LOSS, H_VAL_ACC, H_LR, H_SECONDS = range(7)
HISTORY_COLUMNS = ("epoch", "train_loss", "train_accuracy", "val_loss", "val_accuracy", "lr", "seconds")
BATCH_COLUMNS = ("epoch", "batch", "lr", "train_loss", "train_accuracy")

DIR_IDLE, DIR_FORWARD, DIR_BACKWARD = 0, 1, 2

# Stop requests Python writes into ``state[ST_STOPPED]`` while a fit runs (Ctrl-C): the loop reads
# the field before every epoch and before every job. STOP_AFTER_EPOCH ends the fit before the next
# epoch; STOP_NOW abandons the running epoch before its next job (status INTERRUPTED).
STOP_AFTER_EPOCH, STOP_NOW = 2.0, 3.0
