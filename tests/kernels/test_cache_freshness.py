"""A cached compiled function does not keep running an edited callee's old code, nor another
file's old constants.

numba stamps a cache entry with the function's own file only; nnjit's caches add the digest of
every file the code reaches (nnjit.kernels.source_reach). Two child processes share one cache:
the first compiles ``caller`` (in caller.py), which calls ``kernel`` (in kernel.py); then only
kernel.py is edited, and the second process must see the new kernel through ``caller``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CALLER = textwrap.dedent("""\
    from nnjit.kernels._jit import jit

    import kernel


    @jit
    def caller(x):
        return kernel.kernel(x) * 10
    """)
KERNEL = textwrap.dedent("""\
    from nnjit.kernels._jit import jit


    @jit
    def kernel(x):
        return x + {increment}
    """)
RUN = "import caller; print(caller.caller(1), caller.caller.stats.cache_hits.total())"


def _run(folder: Path, cache: Path) -> tuple[int, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env["NUMBA_CACHE_DIR"] = str(cache)
    env["PYTHONPATH"] = os.pathsep.join([str(folder), str(REPO)])
    out = subprocess.run([sys.executable, "-c", RUN], cwd=folder, env=env, capture_output=True,
                         text=True, timeout=300, check=True).stdout.split()
    return int(out[0]), int(out[1])


def test_an_edited_callee_in_another_file_is_recompiled_not_served_stale(tmp_path):
    (tmp_path / "caller.py").write_text(CALLER)
    (tmp_path / "kernel.py").write_text(KERNEL.format(increment=1))
    cache = tmp_path / "cache"
    assert _run(tmp_path, cache) == (20, 0)
    assert _run(tmp_path, cache) == (20, 1)  # unchanged sources: loaded from the cache
    (tmp_path / "kernel.py").write_text(KERNEL.format(increment=2))  # caller.py untouched
    assert _run(tmp_path, cache)[0] == 30


READER = textwrap.dedent("""\
    from nnjit.kernels._jit import jit

    from constants import SCALE


    @jit
    def caller(x):
        return x * SCALE
    """)


def test_an_edited_constant_in_another_file_is_recompiled_not_served_stale(tmp_path):
    """numba compiles an imported global's value into the code: an edit of the file defining it
    (a record layout's field index, say) must not leave the old value running."""
    (tmp_path / "caller.py").write_text(READER)
    (tmp_path / "constants.py").write_text("SCALE = 10\n")
    cache = tmp_path / "cache"
    assert _run(tmp_path, cache) == (10, 0)
    assert _run(tmp_path, cache) == (10, 1)
    (tmp_path / "constants.py").write_text("SCALE = 20\n")  # caller.py untouched
    assert _run(tmp_path, cache)[0] == 20
