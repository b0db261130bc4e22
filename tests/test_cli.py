"""The command line: the installed ``nnjit`` command in a subprocess (what a user runs), and
``nnjit.cli.main`` in-process where only the output matters."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import nnjit
from nnjit.cli import main
from nnjit.experiment import ModelConfig, NetConfig, RunConfig, TrainConfig
from nnjit.experiment.run_folder import Run
from tests.helpers import installed_nnjit

REPO = Path(__file__).resolve().parent.parent


def nnjit_command(*args, cwd, timeout=300) -> subprocess.CompletedProcess:
    """Run the installed ``nnjit`` console script (the one next to this Python) with this
    checkout first on PYTHONPATH; returns the finished process (text stdout / stderr)."""
    exe = installed_nnjit()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [
        p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return subprocess.run([exe, *map(str, args)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _write_config(tmp_path, data=None, loss="cross_entropy", in_dim=4, out_dim=3):
    cfg = RunConfig(model=ModelConfig(net=NetConfig(in_dim=in_dim, out_dim=out_dim,
                                                    hidden_dims=(8,)), loss=loss),
                    train=TrainConfig(epochs=4, batch_size=16, patience=None), data=data)
    path = tmp_path / "cfg.yaml"
    path.write_text(cfg.to_yaml())
    return path, cfg


@pytest.mark.parametrize("argv", [[], ["train"], ["runs"], ["runs", "list"], ["runs", "show"],
                                  ["report"], ["demo"], ["warmup"]])
def test_help_everywhere(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "usage: nnjit" in out and "``" not in out  # (no reStructuredText: issue 25, 15)


def test_runs_alone_lists_the_runs_and_no_internal_name_shows(tmp_path):
    """``nnjit runs``, as the README lists it, lists the runs (it failed with "required:
    runs_command", an internal name; issue 25, item 6); a missing command names COMMAND."""
    proc = nnjit_command("runs", cwd=tmp_path)
    assert proc.returncode == 0 and "no runs in runs" in proc.stdout, proc.stderr
    proc = nnjit_command("runs", "--root", "elsewhere", cwd=tmp_path)
    assert proc.returncode == 0 and "no runs in elsewhere" in proc.stdout, proc.stderr
    proc = nnjit_command(cwd=tmp_path)
    assert proc.returncode == 2 and "COMMAND" in proc.stderr and "command" not in proc.stderr


def test_train_list_show(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path, cfg = _write_config(tmp_path, data="iris")
    assert main(["train", str(path), "--root", "runs", "-q"]) == 0
    out = capsys.readouterr().out
    run_id = cfg.config_hash()
    assert f"run runs/{run_id}: 4 epochs" in out and str(tmp_path) not in out
    assert (tmp_path / "runs" / run_id / "checkpoints" / "last.nne").exists()
    assert main(["runs", "list", "--root", "runs"]) == 0
    out = capsys.readouterr().out
    assert run_id in out and "mlp 4-8-3" in out
    assert main(["runs", "show", run_id, "--root", "runs"]) == 0
    out = capsys.readouterr().out
    assert "epochs: 4" in out and "last (epoch 4)" in out and "in_dim: 4" in out
    assert str(tmp_path) not in out
    assert main(["runs", "show", "../etc", "--root", "runs"]) == 2
    assert "nnjit runs show: invalid run id '../etc'" in capsys.readouterr().err
    assert main(["runs", "show", "abcdefabcdef", "--root", "runs"]) == 2
    assert "no run 'abcdefabcdef' in runs; runs: " in capsys.readouterr().err


def test_train_says_why_it_stopped_and_which_epoch_was_best(tmp_path):
    """The installed nnjit train ends with why the fit stopped, the monitored metric's best
    epoch (the best checkpoint's) and that checkpoint's accuracy on the evaluation data
    (issue 25, item 4: it printed only the last epoch's numbers)."""
    cfg = RunConfig(model=ModelConfig(net=NetConfig(in_dim=4, out_dim=3, hidden_dims=(8,))),
                    train=TrainConfig(epochs=40, batch_size=16, monitor="val_accuracy",
                                      patience=5, checkpoints=["best", "last"]), data="iris")
    (tmp_path / "cfg.yaml").write_text(cfg.to_yaml())
    proc = nnjit_command("train", "cfg.yaml", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run = Run.load(cfg.config_hash(), tmp_path / "runs")
    epoch = run.checkpoint_epoch("best")
    history = run.history()
    best = history.loc[history["epoch"] == epoch, "val_accuracy"].item()
    lines = proc.stdout.splitlines()
    assert any(line.startswith("stopped: ") for line in lines), proc.stdout
    assert f"best: val_accuracy {best:.4g} @ {epoch}" in lines, proc.stdout
    accuracy = [line for line in lines if "accuracy of the best checkpoint" in line]
    assert len(accuracy) == 1 and f"(epoch {epoch}): " in accuracy[0], proc.stdout


def test_train_from_csv_regression(tmp_path, capsys):
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.normal(size=(60, 2)), columns=["a", "b"])
    df["color"] = np.where(df["a"] > 0, "red", "blue")
    df["y"] = 2 * df["a"] - df["b"]
    df.to_csv(tmp_path / "d.csv", index=False)
    path, cfg = _write_config(tmp_path, loss="mse", in_dim=4, out_dim=1)
    assert main(["train", str(path), "--data", str(tmp_path / "d.csv"),
                 "--root", str(tmp_path / "runs"), "-q"]) == 0
    out = capsys.readouterr().out
    assert "4 epochs" in out and "val_loss" in out and str(tmp_path) not in out
    from nnjit.data.tabular_encoding import TabularEncoding

    encoding = TabularEncoding.load(tmp_path / "runs" / cfg.config_hash() / "encoding.json")
    assert encoding.feature_names == ("a", "b", "color=blue", "color=red")


def test_train_errors(tmp_path, capsys):
    path, _ = _write_config(tmp_path)
    assert main(["train", str(path), "--root", str(tmp_path)]) == 2
    assert "no data" in capsys.readouterr().err
    assert main(["train", str(path), "--data", "nope", "--root", str(tmp_path)]) == 2
    assert "unknown dataset" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: {net: {in_dim: 0, out_dim: 2}}\n")
    assert main(["train", str(bad), "--data", "iris"]) == 2
    assert "in_dim" in capsys.readouterr().err


def test_version():
    proc = nnjit_command("--version", cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert line.startswith(f"nnjit {nnjit.__version__} (numba ") and "Python 3." in line


def test_train_epochs_option_stops_early_and_continues(tmp_path):
    """--epochs N stops a new run after epoch N; with --resume it continues to epoch N."""
    path, cfg = _write_config(tmp_path, data="iris")  # train.epochs 4
    proc = nnjit_command("train", path, "--epochs", "2", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"run runs/{cfg.config_hash()}: 2 epochs" in proc.stdout
    proc = nnjit_command("train", path, "--resume", "last", "--epochs", "6", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"run runs/{cfg.config_hash()}: 6 epochs" in proc.stdout
    history = pd.read_csv(tmp_path / "runs" / cfg.config_hash() / "idps.csv")
    assert history["epoch"].tolist() == [1, 2, 3, 4, 5, 6]
    proc = nnjit_command("train", path, "--epochs", "0", cwd=tmp_path)
    assert proc.returncode == 2 and "--epochs: expected an integer >= 1" in proc.stderr


def _one_line_error(proc, *parts):
    """The process failed as expected: exit 2, one line on stderr holding every part, no
    traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    for part in parts:
        assert part in proc.stderr, (part, proc.stderr)
    return proc.stderr


def test_train_again_refuses_resume_says_finished_overwrite_restarts(tmp_path):
    path, cfg = _write_config(tmp_path, data="iris")  # 4 epochs: first 1, q1 1, q2 2, q3 3
    run = tmp_path / "runs" / cfg.config_hash()
    assert nnjit_command("train", path, "-q", cwd=tmp_path).returncode == 0
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    # a finished run: the line says at once what trains it on (issue 25, item 11)
    _one_line_error(nnjit_command("train", path, "--epochs", "2", cwd=tmp_path),
                    f"nnjit train: run runs/{cfg.config_hash()} is finished (at epoch 4 of 4)",
                    "pass --epochs M with M > 4 (e.g. --resume last --epochs 8)",
                    "or --overwrite")
    _one_line_error(nnjit_command("train", path, "--resume", "last", cwd=tmp_path),
                    "is finished (at epoch 4 of 4); to train on, pass --epochs M with M > 4")
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    proc = nnjit_command("train", path, "--overwrite", "--epochs", "1", "-q", cwd=tmp_path)
    assert proc.returncode == 0 and ": 1 epochs" in proc.stdout, proc.stderr
    assert sorted(p.stem for p in (run / "checkpoints").iterdir()) == ["best", "first", "last",
                                                                      "q1"]
    assert len(pd.read_csv(run / "idps.csv")) == 1


def test_an_interrupted_train_exits_130_and_keeps_its_epochs(tmp_path):
    """Ctrl-C stops nnjit train after the current epoch and exits 130 (128 + SIGINT), so a shell
    script can tell it from a finished run (issue 25, item 10: it exited 0)."""
    import signal
    import time

    cfg = RunConfig(model=ModelConfig(net=NetConfig(in_dim=4, out_dim=3, hidden_dims=(8,))),
                    train=TrainConfig(epochs=1_000_000, batch_size=16, patience=None,
                                      checkpoints=["last"]), data="iris")
    (tmp_path / "cfg.yaml").write_text(cfg.to_yaml())
    exe = installed_nnjit()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    # SIGINT at its default in the child, as a terminal's foreground job has it: a suite started
    # in the background (``cmd &``) passes it on ignored, and the run would never see the Ctrl-C.
    proc = subprocess.Popen([exe, "train", "cfg.yaml", "-q"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    history = tmp_path / "runs" / cfg.config_hash() / "idps.csv"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if history.is_file() and history.read_text().count("\n") > 3:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert "stopped: interrupted" in out and "Traceback" not in err, (out, err)
    assert len(pd.read_csv(history)) >= 3


def test_every_expected_failure_is_one_line_and_exit_2(tmp_path):
    """Each case runs the installed command (all at once, to keep the suite fast) and must exit
    2 with one line naming what failed and what to do; --debug shows the traceback instead."""
    from concurrent.futures import ThreadPoolExecutor

    good, cfg = _write_config(tmp_path, data="iris")
    (tmp_path / "syntax.yaml").write_text("model: [1, 2\n")
    (tmp_path / "tag.yaml").write_text("model: !!python/object/apply:os.system ['true']\n")
    (tmp_path / "bad.csv").write_text("a,b,y\n1,2,x\n3,,y\n")
    (tmp_path / "quote.csv").write_text('a,y\n1,"x\n')
    (tmp_path / "a_file").write_text("")
    (tmp_path / "runs" / "0123456789ab").mkdir(parents=True)  # a folder but no run.yaml
    cases = {  # name: (arguments, parts of the expected line)
        "missing config": (["train", "nope.yaml"],
                           ["cannot read the config nope.yaml: No such file"]),
        "YAML syntax": (["train", "syntax.yaml"],
                        ["invalid config syntax.yaml: not valid YAML at line 2, column 1"]),
        "YAML tag": (["train", "tag.yaml"],
                     ["invalid config tag.yaml: not valid YAML at line 1", "no !! tags"]),
        "endless file": (["train", "/dev/zero"],
                         ["invalid config /dev/zero: not valid YAML: /dev/zero is not a regular "
                          "file"]),
        "config error": (["train", "cfg.yaml", "--data", "digits"],
                         ["does not fit the data: model.net.in_dim is 4 but the data digits "
                          "have 64 input features; set in_dim: 64"]),
        "unknown dataset": (["train", "cfg.yaml", "--data", "nope"],
                            ["cannot use the data nope: unknown dataset 'nope'", ".csv"]),
        "missing CSV": (["train", "cfg.yaml", "--data", "gone.csv"],
                        ["no such CSV file: gone.csv"]),
        "CSV missing value": (["train", "cfg.yaml", "--data", "bad.csv"],
                              ["cannot use the data bad.csv", "missing values", "b (1 of 2)"]),
        "CSV syntax": (["train", "cfg.yaml", "--data", "quote.csv"],
                       ["cannot use the data quote.csv", "EOF inside string"]),
        "unwritable root": (["train", "cfg.yaml", "--root", "a_file", "-q"],
                            ["cannot write", "Not a directory", "pass --root with a folder"]),
        "resume before a checkpoint": (["train", "cfg.yaml", "--resume", "last"],
                                       ["cannot resume: run runs/" + cfg.config_hash(),
                                        "does not exist yet; run nnjit train without --resume"]),
        "unknown run": (["runs", "show", "0123456789ab"],
                        ["nnjit runs show: no run '0123456789ab' in runs",
                         "nnjit runs list --root runs"]),
        "invalid run id": (["report", "../x"], ["nnjit report: invalid run id '../x'"]),
        "debug": (["--debug", "train", "nope.yaml"], None),
        "debug after the command": (["train", "nope.yaml", "--debug"], None),
    }
    with ThreadPoolExecutor(4) as pool:
        procs = dict(zip(cases, pool.map(lambda c: nnjit_command(*c[0], cwd=tmp_path),
                                         cases.values())))
    for name, (argv, parts) in cases.items():
        proc = procs[name]
        if parts is None:  # --debug: the traceback, ending with the chained CommandError
            assert proc.returncode == 1 and "Traceback" in proc.stderr, name
            assert "FileNotFoundError" in proc.stderr and proc.stderr.rstrip().splitlines()[
                -1].startswith("nnjit.cli.errors.CommandError: cannot read the config"), name
            continue
        line = _one_line_error(proc, *parts)
        assert line.startswith(f"nnjit {argv[0]}"), (name, line)
    assert not (tmp_path / "runs" / cfg.config_hash()).exists()  # no failure left a run behind
    assert good.exists()


def test_a_bug_keeps_its_traceback(monkeypatch, tmp_path):
    import nnjit.cli.train

    def broken(path):
        raise KeyError("a bug")

    monkeypatch.setattr(nnjit.cli.train, "load_config", broken)
    with pytest.raises(KeyError, match="a bug"):
        main(["train", str(tmp_path / "cfg.yaml")])


def test_runs_list_empty(tmp_path, capsys):
    assert main(["runs", "list", "--root", str(tmp_path / "none")]) == 0
    assert "no runs" in capsys.readouterr().out


def test_report_html(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path, cfg = _write_config(tmp_path, data="iris")
    assert main(["train", str(path), "-q"]) == 0
    assert main(["report", cfg.config_hash()]) == 0
    out = capsys.readouterr().out
    assert f"runs/{cfg.config_hash()}/report.html" in out and str(tmp_path) not in out
    page = (tmp_path / "runs" / cfg.config_hash() / "report.html").read_text()
    assert page.count("plotly.js v") <= 2  # plotly.js inlined once (its banner)
    assert page.count("Plotly.newPlot") == 5 and "<table" in page and "val_loss" in page
    assert "<th>accuracy</th>" in page and ">NaN<" not in page  # (empty cells: issue 25, 9)
    assert "src=\"https://cdn" not in page and len(page) > 1_000_000  # plotly.js inside
    assert main(["report", "../x"]) == 2
    assert "nnjit report: invalid run id" in capsys.readouterr().err


CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome",
                                                "google-chrome-stable"))), None)


@pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium or Chrome on PATH (Debian: "
                    "apt-get install chromium; .ci/run installs it when it may use apt-get)")
def test_report_renders_in_chromium(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path, cfg = _write_config(tmp_path, data="iris")
    main(["train", str(path), "-q"])
    main(["report", cfg.config_hash()])
    page = tmp_path / "runs" / cfg.config_hash() / "report.html"
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                          "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=60).stdout
    assert dom.count("main-svg") >= 5  # plotly drew its SVG for every figure (history, CM, t-SNE)
    assert dom.count('class="hm"') == 1  # the confusion matrix heatmap was painted
    assert dom.count('class="point"') >= 23  # one t-SNE marker per validation row of Iris


@pytest.mark.parametrize("folder", [".", "docs"])
def test_bench_runs_the_checkouts_benchmarks(folder):
    """From the repository root or any folder below it, the installed command finds
    benchmarks/ and passes every argument to python -m benchmarks (--help included)."""
    proc = nnjit_command("bench", "--help", cwd=REPO / folder)
    assert proc.returncode == 0, proc.stderr
    # (it named itself "python -m benchmarks" in its usage line: issue 25, item 15)
    assert "usage: nnjit bench" in proc.stdout and "--only ONLY" in proc.stdout
    proc = nnjit_command("bench", "--only", "nope", cwd=REPO / folder)
    assert proc.returncode == 2 and "unknown benchmark 'nope'; valid: core," in proc.stderr


def test_bench_skipping_every_benchmark_runs_the_suite_to_its_summary():
    from benchmarks.__main__ import BENCHMARKS

    proc = nnjit_command("bench", "--skip", ",".join(BENCHMARKS), cwd=REPO / "nnjit")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("skipped (--skip)") == len(BENCHMARKS)


def test_bench_outside_a_checkout_is_one_line(tmp_path):
    proc = nnjit_command("bench", "--quick", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(
        f"nnjit bench: no nnjit repository checkout in {tmp_path.resolve()} or its parents")


def test_demo_cora_trains_a_gcn(capsys):
    assert main(["demo", "--dataset", "cora", "--epochs", "30", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    accuracy = float(re.search(r"test accuracy ([0-9.]+)", out).group(1))
    assert "GCN 1433-16-7" in out and accuracy > 0.5
    timing = re.search(r"time: the fit took ([0-9.]+) s: (?:([0-9.]+) s compiling the training "
                       r"loop \(first run only, now cached\), )?30 epochs of compiled training in "
                       r"([0-9.]+) s \(([0-9.]+) ms per epoch\), ([0-9.]+) s start-up", out)
    assert timing, out
    wall, compiling, training, start_up = (float(timing.group(k) or 0) for k in (1, 2, 3, 5))
    assert 0 < training <= wall and abs(wall - training - compiling - start_up) < 0.02


def test_warmup_both_dtypes_and_the_old_graph_flag(capsys):
    """``--all`` prepares float32 and float64; ``--graph`` (from when the graph ops were a build
    of their own) is still accepted: every family is one of the pieces now."""
    assert main(["warmup", "--all", "--graph"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^float32: \d+ pieces ready in", out, re.M), out
    assert re.search(r"^float64: \d+ pieces ready in", out, re.M), out
    assert "float64: the conv family: " in out
