"""Processes that need the same build at once compile it once (compile_notice.ensure_compiled).

Two processes import a small cached kernel, meet at a barrier, then ask for the same overload at
the same moment: with the lock next to numba's cache files, one compiles and the other waits and
loads that cache (numba's own counters say which); without it both would compile.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

KERNEL = '''
from nnjit.kernels._jit import jit


@jit
def kernel(x):
    total = 0.0
    for i in range(x.size):
        total += x[i] * x[i] if x[i] > 0 else -x[i]
    return total
'''

WORKER = textwrap.dedent('''
    import os, sys, time
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from nnjit.engine import compile_notice
    from lockprobe import kernel
    go = os.path.join(sys.argv[1], "go")
    open(os.path.join(sys.argv[1], "ready-" + sys.argv[2]), "w").close()
    while not os.path.exists(go):
        time.sleep(0.002)
    compile_notice.ensure_compiled(kernel, (np.ones(3),))
    print(sum(kernel.stats.cache_misses.values()), sum(kernel.stats.cache_hits.values()))
''')


def _env() -> dict:
    # (no NUMBA_CACHE_DIR: the cache, and the lock beside it, go next to the probe's source)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    return {**env, "NNJIT_COMPILE_NOTICE": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def test_two_processes_compile_one_build_once(tmp_path):
    (tmp_path / "lockprobe.py").write_text(KERNEL)
    env = {**_env(), "NNJIT_COMPILE_NOTICE": "0"}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path), str(i)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"ready-{i}").exists() for i in range(2)):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), \
            [p.communicate() for p in procs if p.poll() is not None]
        time.sleep(0.005)
    (tmp_path / "go").touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(tuple(int(v) for v in out.split()))
    # (misses, hits) per process: exactly one compiled, the other loaded its cache
    assert sorted(results) == [(0, 1), (1, 0)]
    assert list(tmp_path.glob("__pycache__/lockprobe.kernel-*.lock"))


LOCK_PATH = textwrap.dedent('''
    import hashlib, os
    def lock_path(dispatcher, args):
        signature = tuple(dispatcher.typeof_pyval(a) for a in args)
        cache = dispatcher._cache
        index = cache._cache_file._index_name
        key = hashlib.sha256(f"{index} {signature}".encode()).hexdigest()[:16]
        return signature, os.path.join(cache._cache_path, f"{index}.{key}.lock")
''')

SYMLINKED = LOCK_PATH + textwrap.dedent('''
    import sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from nnjit.engine import compile_notice
    from lockprobe import kernel
    args = (np.ones(3),)
    _, path = lock_path(kernel, args)
    os.symlink(os.path.join(sys.argv[1], "elsewhere"), path)
    compile_notice.ensure_compiled(kernel, args)
    print(kernel(*args))
''')




def test_a_symlink_at_the_lock_path_is_refused(tmp_path):
    """The lock file is opened without following a symbolic link (before, the link's target
    was created): one warning line, and the compile goes on without the lock."""
    (tmp_path / "lockprobe.py").write_text(KERNEL)
    done = subprocess.run([sys.executable, "-c", SYMLINKED, str(tmp_path)], env=_env(),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert float(done.stdout.split()[-1]) == 3.0
    assert not (tmp_path / "elsewhere").exists(), "the lock followed a symbolic link"
    [line] = [x for x in done.stderr.splitlines() if "compile lock" in x]
    assert "symbolic link" in line and "without the lock" in line


HOLDER = LOCK_PATH + textwrap.dedent('''
    import signal, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from nnjit.engine import compile_notice
    from lockprobe import kernel
    signature, _ = lock_path(kernel, (np.ones(3),))
    with compile_notice._compile_lock(kernel, signature):
        print("locked", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)  # Ctrl-Z while compiling
''')

WAITER = textwrap.dedent('''
    import sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from nnjit.engine import compile_notice
    compile_notice.LOCK_NOTICE_SECONDS, compile_notice.LOCK_WAIT_SECONDS = 1.0, 4.0
    from lockprobe import kernel
    compile_notice.ensure_compiled(kernel, (np.ones(3),))
    print(kernel(np.ones(3)))
''')


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@pytest.mark.skipif(not os.path.exists("/proc/self/stat") or not hasattr(signal, "SIGSTOP"),
                    reason="needs SIGSTOP and /proc to see a stopped process")
def test_a_stopped_compiler_holding_the_lock_blocks_others_only_for_a_bounded_wait(tmp_path):
    """A compiling process stopped with Ctrl-Z (SIGSTOP) holds the lock: another process that
    needs the same build says whom it waits for, then compiles without the lock (before, it
    waited silently forever)."""
    (tmp_path / "lockprobe.py").write_text(KERNEL)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], env=_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    waiter = None
    try:
        assert holder.stdout.readline().strip() == "locked", holder.stderr.read()[-3000:]
        deadline = time.monotonic() + 30
        while _state(holder.pid) != "T":
            assert time.monotonic() < deadline, "the holder did not stop"
            time.sleep(0.01)
        waiter = subprocess.Popen([sys.executable, "-c", WAITER, str(tmp_path)], env=_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = waiter.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            pytest.fail("a process waited more than 90 s for a stopped compiler's lock")
        assert waiter.returncode == 0, err[-3000:]
        assert float(out.split()[-1]) == 3.0
        assert f"nnjit: waiting for process {holder.pid} compiling kernel" in err, err
        assert "compiling without it" in err, err
    finally:
        for proc in (holder, waiter):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def test_a_quiet_fit_compiles_its_training_loop_under_the_lock(monkeypatch):
    """A fit without callbacks or progress (one compiled call) goes through ensure_compiled,
    which holds the cross-process lock while it compiles (before, two quiet fits on a cold
    cache both compiled the training loop)."""
    import numpy as np

    import nnjit as nn
    from nnjit.engine import compile_notice, program
    from nnjit.engine import interpreter as it

    seen = []
    real = compile_notice.ensure_compiled
    monkeypatch.setattr(compile_notice, "ensure_compiled",
                        lambda dispatcher, args: (seen.append(dispatcher), real(dispatcher, args)))
    monkeypatch.setattr(program, "_locked_tables", {}, raising=False)
    X = np.random.default_rng(0).standard_normal((32, 3)).astype(np.float32)
    model = nn.Sequential(nn.DenseLayer(3, 1))
    nn.JITCompiler(model, nn.SGD(learning_rate=0.05), nn.MSELoss()).fit(
        nn.DataLoader(X, X[:, :1], batch_size=8), epochs=2, verbose=0)
    assert it.execute in seen
