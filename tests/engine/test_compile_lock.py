"""Processes that need the same build at once compile it once (compile_notice.ensure_compiled).

Two processes import a small cached kernel, meet at a barrier, then ask for the same overload at
the same moment: with the lock next to numba's cache files, one compiles and the other waits and
loads that cache (numba's own counters say which); without it both would compile.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

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


def test_two_processes_compile_one_build_once(tmp_path):
    (tmp_path / "lockprobe.py").write_text(KERNEL)
    env = {**os.environ, "NNJIT_COMPILE_NOTICE": "0"}
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
