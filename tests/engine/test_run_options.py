"""A static Program and typed run options: ``RunOptions`` alone writes the config row, the
program's layout vector never changes after it is built, and every run hands the compiled loop
one ``LoopArrays`` gathered by the program."""

from __future__ import annotations

import ast
import copy
import dataclasses
import inspect
import math
import pathlib
import pickle

import numpy as np
import pytest
from numba import typeof, types

import nnjit as nn
from nnjit.data import Augment, ImageDataset
from nnjit.engine import dispatch, fields
from nnjit.engine import interpreter as it
from nnjit.engine.loop_arrays import LoopArrays
from nnjit.engine.native_call import signature_key
from nnjit.engine.run_options import Augmentation, MPIRun, RunOptions

PACKAGE = pathlib.Path(__file__).parents[2] / "nnjit"
AUGMENTATION = Augmentation(slot=3, pad=2, flip=True, channels=1, height=8, width=8)
MPI_RUN = MPIRun(ranks=4, rank=1, comm=2**40 + 8, datatype=17, double=18, sum=-19, in_place=1)


def _options(**changes) -> RunOptions:
    base = dict(task=fields.TASK_FIT, batch=16, eval_batch=64, dense_mode=0)
    return RunOptions(**{**base, **changes})


# -- the spec --------------------------------------------------------------------------------------
def test_options_are_frozen_keyword_only_and_hashable():
    with pytest.raises(TypeError):
        RunOptions(fields.TASK_FIT, 16, 64, 0)  # (keyword-only)
    options = _options()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.batch = 32
    assert options == _options() and hash(options) == hash(_options())
    assert options != _options(epochs=2)


def test_config_row_puts_every_option_at_its_field():
    options = _options(
        shuffle=fields.SHUFFLE_GIVEN, drop_last=True, tol=0.5, patience=math.inf,
        monitor=fields.MONITOR_VAL_ACCURACY, restore_best=True, epochs=7, chunk=2,
        optimizer=fields.OPT_SKLEARN_ADAM, reg_coef=1e-3, reg_per_batch=True, clip_norm=2.0,
        accumulation_steps=4, plateau=fields.PLATEAU_SKLEARN_ADAPTIVE, dense_mode=1,
        mpi=MPI_RUN)
    expected = {
        fields.C_BATCH: 16, fields.C_EVAL_BATCH: 64, fields.C_SHUFFLE: fields.SHUFFLE_GIVEN,
        fields.C_DROP_LAST: 1, fields.C_TOL: 0.5, fields.C_PATIENCE: math.inf,
        fields.C_MONITOR: fields.MONITOR_VAL_ACCURACY, fields.C_RESTORE_BEST: 1,
        fields.C_EPOCHS: 7, fields.C_CHUNK: 2, fields.C_OPT_KIND: fields.OPT_SKLEARN_ADAM,
        fields.C_REG_COEF: 1e-3, fields.C_REG_PER_BATCH: 1, fields.C_CLIP_NORM: 2.0,
        fields.C_ACCUM_STEPS: 4, fields.C_PLATEAU: fields.PLATEAU_SKLEARN_ADAPTIVE,
        fields.C_DENSE_MODE: 1,
        fields.C_AUG_SLOT: -1, fields.C_AUG_PAD: 0, fields.C_AUG_FLIP: 0, fields.C_AUG_C: 0,
        fields.C_AUG_H: 0, fields.C_AUG_W: 0,
        fields.C_MPI_RANKS: 4, fields.C_MPI_RANK: 1, fields.C_MPI_COMM: 2**40 + 8,
        fields.C_MPI_DATATYPE: 17, fields.C_MPI_DOUBLE: 18, fields.C_MPI_SUM: -19,
        fields.C_MPI_IN_PLACE: 1}
    assert sorted(expected) == list(range(fields.CONFIG_WIDTH))
    row = options.config_row()
    assert row.dtype == np.float64 and row.shape == (fields.CONFIG_WIDTH,)
    assert {k: row[k] for k in expected} == expected
    augmented = _options(augmentation=AUGMENTATION).config_row()
    assert list(augmented[fields.C_AUG_SLOT : fields.C_AUG_W + 1]) == [3, 2, 1, 1, 8, 8]
    assert not augmented[fields.C_MPI_RANKS : fields.C_MPI_IN_PLACE + 1].any()


def test_the_config_row_is_made_once_and_read_only():
    options = _options()
    row = options.config_row()
    assert options.config_row() is row and not row.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        row[fields.C_BATCH] = 32


@pytest.mark.parametrize("duplicate", [copy.copy, copy.deepcopy,
                                       lambda o: pickle.loads(pickle.dumps(o))])
def test_a_copied_or_unpickled_spec_keeps_a_read_only_row(duplicate):
    """(A trainer copied or unpickled carries its last fit's options.)"""
    options = _options(augmentation=AUGMENTATION)
    twin = duplicate(options)
    assert twin == options and np.array_equal(twin.config_row(), options.config_row())
    assert not twin.config_row().flags.writeable


@pytest.mark.parametrize("changes, error, message", [
    (dict(task=7), ValueError, "RunOptions: task must be one of 0 (TASK_FIT), 1 (TASK_EVALUATE), "
                               "2 (TASK_PREDICT), 3 (TASK_GRADIENT), got 7"),
    (dict(batch=0), ValueError, "RunOptions: batch must be an int >= 1, got 0"),
    (dict(eval_batch=2.0), TypeError, "RunOptions: eval_batch must be an int >= 1, got 2.0 "
                                      "(float)"),
    (dict(dense_mode=2), ValueError, "RunOptions: dense_mode must be one of 0 (MODE_AVX2), "
                                     "1 (MODE_AVX512), got 2"),
    (dict(shuffle=True), ValueError, "RunOptions: shuffle must be one of 0 (SHUFFLE_OFF)"),
    (dict(drop_last=1), ValueError, "RunOptions: drop_last must be True or False, got 1"),
    (dict(tol=-1.0), ValueError, "RunOptions: tol must be a number >= 0 or math.inf (never "
                                 "improves), got -1.0"),
    (dict(tol=math.nan), ValueError, "RunOptions: tol must be a number >= 0 or math.inf"),
    (dict(patience=1.5), TypeError, "RunOptions: patience must be an int >= 0 or math.inf "
                                    "(never stops), got 1.5 (float)"),
    (dict(monitor=-1), ValueError, "RunOptions: monitor must be one of 0 (MONITOR_VAL_LOSS)"),
    (dict(epochs=0), ValueError, "RunOptions: epochs must be an int >= 1, got 0"),
    (dict(chunk=-1), ValueError, "RunOptions: chunk must be an int >= 0, got -1"),
    (dict(optimizer="adam"), TypeError, "RunOptions: optimizer must be an int, got 'adam'"),
    (dict(reg_coef=-0.1), ValueError, "RunOptions: reg_coef must be >= 0, got -0.1"),
    (dict(clip_norm=math.inf), ValueError, "RunOptions: clip_norm must be a finite number >= 0"),
    (dict(accumulation_steps=0), ValueError, "RunOptions: accumulation_steps must be an int "
                                             ">= 1, got 0"),
    (dict(plateau=3), ValueError, "RunOptions: plateau must be one of 0 (PLATEAU_OFF)"),
    (dict(augmentation=(3, 2)), TypeError, "RunOptions: augmentation must be an Augmentation "
                                           "or None, got (3, 2) (tuple)"),
    (dict(augmentation=AUGMENTATION, task=fields.TASK_PREDICT), ValueError,
     "RunOptions: augmentation applies to fits (task TASK_FIT) only, not TASK_PREDICT"),
    (dict(mpi=MPI_RUN, task=fields.TASK_GRADIENT), ValueError,
     "RunOptions: mpi applies to fits (task TASK_FIT) only, not TASK_GRADIENT"),
    (dict(augmentation=AUGMENTATION, mpi=MPI_RUN), ValueError,
     "RunOptions: augmentation and mpi have no build together"),
])
def test_each_bad_option_is_named(changes, error, message):
    with pytest.raises(error) as info:
        _options(**changes)
    assert str(info.value).startswith(message)


def test_numpy_values_pass_the_rules_and_give_the_same_row():
    plain = _options(batch=16, tol=1e-4, patience=10, reg_coef=0.5, restore_best=True)
    numpy = _options(batch=np.int64(16), tol=np.float64(1e-4), patience=np.int32(10),
                     reg_coef=np.float32(0.5), restore_best=np.bool_(True))
    assert np.array_equal(plain.config_row(), numpy.config_row())
    assert _options(patience=np.inf).config_row()[fields.C_PATIENCE] == math.inf


@pytest.mark.parametrize("make, message", [
    (lambda: MPIRun(ranks=1, rank=0, comm=1, datatype=1, double=1, sum=1, in_place=1),
     "MPIRun: ranks must be an int >= 2, got 1"),
    (lambda: MPIRun(ranks=2, rank=2, comm=1, datatype=1, double=1, sum=1, in_place=1),
     "MPIRun: rank must be an int in [0, 1], got 2"),
    (lambda: MPIRun(ranks=2, rank=0, comm=2**53, datatype=1, double=1, sum=1, in_place=1),
     "MPIRun: comm must be an int of magnitude below 2**53 (exact in the float64 config row)"),
    (lambda: Augmentation(slot=-1, pad=0, flip=True, channels=1, height=2, width=2),
     "Augmentation: slot must be an int >= 0, got -1"),
    (lambda: Augmentation(slot=0, pad=1, flip=1, channels=1, height=2, width=2),
     "Augmentation: flip must be True or False, got 1"),
    (lambda: Augmentation(slot=0, pad=1, flip=True, channels=1, height=0, width=2),
     "Augmentation: height must be an int >= 1, got 0"),
])
def test_augmentation_and_mpi_runs_are_checked(make, message):
    with pytest.raises(ValueError) as info:
        make()
    assert str(info.value).startswith(message)


# -- the arrays of one run -------------------------------------------------------------------------
def test_loop_arrays_name_executes_arguments_in_order():
    params = list(inspect.signature(getattr(it.execute, "py_func", it.execute)).parameters)
    assert list(LoopArrays._fields) == params


def _images(n=64, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 1, 8, 8)).astype(np.float32), rng.integers(0, 3, n)


def _cnn_trainer(seed=0):
    nn.set_seed(seed)
    model = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(128, 3))
    return nn.Trainer(model, nn.Adam(lr=0.01), seed=seed)


def test_every_run_gets_its_options_row_and_the_programs_layout():
    images, labels = _images()
    trainer = _cnn_trainer()
    trainer.fit(nn.DataLoader(images, labels, batch_size=16), epochs=1, verbose=False)
    program, options = trainer.program, trainer._options
    arrays = program.loop_arrays(options, (images.reshape(64, -1), np.zeros((64, 1), np.float32),
                                           images.reshape(64, -1), np.zeros((64, 1), np.float32),
                                           trainer._perm),
                                 trainer._no_step(), trainer._state, trainer._best,
                                 np.zeros((1, 7)), np.zeros((0, 3), np.float32))
    assert arrays.task == fields.TASK_FIT and arrays.layout is program.layout
    assert arrays.cfg is options.config_row() and not arrays.cfg.flags.writeable
    assert arrays.table is program._table(options, arrays.X, arrays.Y, arrays.perm)
    # the compiled loop itself is typed with a read-only config row: it cannot write it
    cfg_arg = LoopArrays._fields.index("cfg")
    assert all(not sig[cfg_arg].mutable for sig in it.execute.signatures)


def test_the_layout_never_changes_after_the_program_is_built():
    """A fit with augmentation (the augmenting loader, reading the options' row), a plain fit,
    predict, evaluate and gradients all leave the layout vector bit for bit as it was built;
    the runs' tables follow their options, not the layout."""
    images, labels = _images()
    trainer = _cnn_trainer()
    plain = nn.DataLoader(images, labels, batch_size=16)
    trainer.fit(plain, epochs=1, verbose=False)
    program = trainer.program
    built = program.layout.tobytes()
    augmented = ImageDataset(images, labels, augment=Augment(crop_padding=1,
                                                            horizontal_flip=True))
    trainer.fit(nn.DataLoader(augmented, batch_size=16), epochs=2, verbose=False)
    assert trainer.program is program and program.layout.tobytes() == built
    assert trainer._options.augmentation == Augmentation(
        slot=program.input_slot, pad=1, flip=True, channels=1, height=8, width=8)
    trainer.fit(plain, epochs=1, verbose=False)
    trainer.predict(images[:16])  # (the rows the layout holds; more lay out for inference)
    trainer.evaluate(images[:16], labels[:16])
    trainer.gradients(images[:16], labels[:16])
    assert trainer.program is program and program.layout.tobytes() == built
    assert {key[:2] for key in program._tables} == {(True, False),
                                                  (False, False)}
    # the template a cached layout is instantiated from shares the same vector
    assert program.template().instance(1).layout.tobytes() == built


def _layout_writes(tree: ast.AST) -> list[int]:
    """Lines assigning into ``layout[...]``/``x.layout[...]`` or rebinding ``x.layout``."""
    lines = []
    for node in ast.walk(tree):
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Subscript):
                    base = part.value
                    name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", None)
                    if name == "layout":
                        lines.append(node.lineno)
                elif isinstance(part, ast.Attribute) and part.attr == "layout":
                    lines.append(node.lineno)
    return lines


def test_no_code_writes_a_layout_vector_but_the_programs_constructor():
    writes = {}
    for path in PACKAGE.rglob("*.py"):
        lines = _layout_writes(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            writes[str(path.relative_to(PACKAGE))] = lines
    program = ast.parse((PACKAGE / "engine" / "program.py").read_text(encoding="utf-8"))
    init = next(n for n in ast.walk(program) if isinstance(n, ast.FunctionDef)
                and n.name == "__init__" and n.args.args[1].arg == "tape")
    assert writes == {"engine/program.py": _layout_writes(init)}
    assert len(writes["engine/program.py"]) == 1  # (the one `self.layout = np.array(...)`)


# -- the dispatch table's signatures ---------------------------------------------------------------
def _layout_era_signature(column: int, dtype, data_types):
    """Each table entry's signature as it was before the hooks took the config row (the
    layout vector in its place): an entry compiled for it must not be called."""
    i64, layout = types.int64, types.Array(types.int64, 1, "C")
    arena, f64 = dispatch.arena_type(dtype), types.Array(types.float64, 1, "C")
    if column == dispatch.T_LOADER:
        return i64, (*data_types, types.boolean, i64, i64, types.boolean, arena,
                     types.Array(types.int64, 2, "C"), layout, layout, layout)
    if column == dispatch.T_OPTIMIZER:  # (the step before it took the kind: not layout-era)
        return types.boolean, (arena, arena, types.Array(arena.dtype, 2, "C"), f64,
                               types.float64, i64)
    return {dispatch.T_SHARD_ROWS: (types.UniTuple(i64, 2), (i64, i64, i64, layout)),
            dispatch.T_SYNC_GRADIENTS: (types.Tuple((i64, types.boolean)),
                                        (arena, f64, i64, i64, layout)),
            dispatch.T_SYNC_EPOCH: (i64, (f64, layout))}[column]


@pytest.mark.parametrize("column", [dispatch.T_LOADER, dispatch.T_SHARD_ROWS,
                                    dispatch.T_SYNC_GRADIENTS, dispatch.T_SYNC_EPOCH,
                                    dispatch.T_OPTIMIZER])
def test_an_entry_of_another_signature_is_refused_at_run_time(column, monkeypatch):
    """The table entries, their signatures in nnjit.engine.dispatch and the interpreter's calls
    must agree: an entry whose key names another signature is not called, the run stops with
    BAD_TABLE naming the column."""
    X = np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32)
    y = np.arange(32) % 3
    trainer = nn.Trainer(nn.Sequential(nn.Linear(4, 3)), nn.SGD(lr=0.1), seed=0)
    trainer.fit(X, y, epochs=1, batch_size=8, verbose=False)  # (the real table works)
    program = trainer.program
    real_table = program._table

    def forged_table(options, X, Y, perm):
        table = real_table(options, X, Y, perm).copy()
        data_types = tuple(typeof(a) for a in (X, Y, perm))
        table[0, column + 1] = signature_key(*_layout_era_signature(column, np.float32,
                                                                     data_types))
        return table

    monkeypatch.setattr(program, "_table", forged_table)
    with pytest.raises(RuntimeError, match=rf"dispatch table entry in column {column} was "
                                           "compiled for other argument types"):
        trainer.fit(X, y, epochs=1, batch_size=8, verbose=False)
