"""Every code block of README.md and docs/*.md runs as written.

- ```python blocks: the blocks of one page run in order in one namespace (a later block sees the
  names an earlier one defined), in one subprocess per page whose working folder is a temporary
  folder (files the blocks write land there).
- ```yaml blocks are RunConfig files: each is trained by the installed ``nnjit train`` with a
  small epoch cap and must exit 0 and write a run folder.
- ```bash / ```sh blocks: each command runs through ``bash`` in a temporary folder holding a copy
  of ``examples/`` (so ``nnjit train examples/...yaml`` works as from the repository root).

A block that cannot run as written carries a visible marker on the line right before it::

    <!-- docs-test: skip REASON -->

Skips are reported with their page, line and reason. No other way to leave a block out exists.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import installed_nnjit

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EPOCH_CAP = 3  # epochs a YAML config trains in the test (the config's own count when smaller)
PAGE_TIMEOUT = 600

_FENCE = re.compile(r"^```([A-Za-z0-9_+-]*)\s*$")
_MARKER = re.compile(r"^<!--\s*docs-test:\s*(\S+)\s*(.*?)\s*-->\s*$")
_LANGUAGES = {"python": "python", "yaml": "yaml", "yml": "yaml", "bash": "bash", "sh": "bash",
              "console": "bash", "shell": "bash"}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int          # 1-based line of the opening fence
    language: str      # python, yaml, bash (normalised) or the fence's own word
    code: str
    skip: str | None   # the reason given by a skip marker

    @property
    def where(self) -> str:
        return f"{_shown(self.page)}:{self.line}"


def _shown(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else page.name


def extract_blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page, with the marker (if any) right before each."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        start = i
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        if j == len(lines):
            raise AssertionError(f"{_shown(page)}:{start + 1}: unclosed code block")
        skip = None
        prev = start - 1
        while prev >= 0 and not lines[prev].strip():
            prev -= 1
        marker = _MARKER.match(lines[prev]) if prev >= 0 else None
        if marker:
            kind, reason = marker.groups()
            if kind != "skip" or not reason:
                raise AssertionError(f"{_shown(page)}:{prev + 1}: a docs-test marker is "
                                     f"'<!-- docs-test: skip REASON -->', got {lines[prev]!r}")
            skip = reason
        word = fence.group(1).lower()
        blocks.append(Block(page, start + 1, _LANGUAGES.get(word, word),
                            "\n".join(lines[start + 1:j]) + "\n", skip))
        i = j + 1
    return blocks


ALL_BLOCKS = [b for page in PAGES for b in extract_blocks(page)]


def _ids(items):
    return [item.where if isinstance(item, Block) else str(item) for item in items]


# --- Python: one subprocess per page ----------------------------------------------------------

# Runs the page's blocks in one namespace; on an error prints where (page:line) and exits 1.
_DRIVER = r"""
import json, sys, time, traceback
blocks = json.load(open(sys.argv[1], encoding="utf-8"))
namespace = {"__name__": "__main__"}
for block in blocks:
    start = time.perf_counter()
    try:
        # padded so that tracebacks give the line numbers of the page itself
        code = "\n" * block["line"] + block["code"]
        exec(compile(code, block["file"], "exec"), namespace)
    except BaseException:
        print(f"docs-test: the block at {block['where']} failed:", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
    print(f"docs-test: {block['where']} ran in {time.perf_counter() - start:.2f} s",
          file=sys.stderr)
"""

PYTHON_PAGES = [p for p in PAGES if any(b.page == p and b.language == "python" for b in ALL_BLOCKS)]


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=[p.name for p in PYTHON_PAGES])
def test_python_blocks_of_page_run_in_order(page, tmp_path):
    blocks = [b for b in ALL_BLOCKS if b.page == page and b.language == "python"]
    runnable = [{"where": b.where, "file": _shown(b.page), "line": b.line, "code": b.code}
                for b in blocks if b.skip is None]
    script = tmp_path / "docs_blocks.json"
    script.write_text(json.dumps(runnable), encoding="utf-8")
    work = tmp_path / "cwd"
    work.mkdir()
    # The blocks' own temporary folders (docs/custom-ops.md makes a project with mkdtemp, as a
    # user would) go under this test's folder, which pytest cleans up, not the system's.
    temp = tmp_path / "tmp"
    temp.mkdir()
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _DRIVER, str(script)], cwd=work,
                         env={**os.environ, "TMPDIR": str(temp)},
                         capture_output=True, text=True, timeout=PAGE_TIMEOUT)
    seconds = time.perf_counter() - start
    print(f"{page.name}: {len(runnable)} Python blocks in {seconds:.1f} s")
    assert out.returncode == 0, f"{page.name}:\n{out.stdout[-3000:]}\n{out.stderr[-6000:]}"
    assert out.stderr.count("docs-test: ") == len(runnable), out.stderr[-3000:]
    skipped = [f"{b.where} ({b.skip})" for b in blocks if b.skip]
    if skipped:  # visible in the test report, never silent
        print("skipped by marker: " + "; ".join(skipped))


# --- YAML: RunConfig files through the installed nnjit train ----------------------------------

YAML_BLOCKS = [b for b in ALL_BLOCKS if b.language == "yaml"]


def train_config(config: Path, cwd: Path, cap: int = EPOCH_CAP) -> tuple[str, Path]:
    """``nnjit train CONFIG --epochs cap`` in ``cwd``; returns stdout and the one run folder."""
    out = subprocess.run([installed_nnjit(), "train", str(config), "--root", "runs", "--quiet",
                          "--epochs", str(cap)], cwd=cwd, capture_output=True, text=True,
                         timeout=PAGE_TIMEOUT)
    assert out.returncode == 0, f"{config}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    runs = [p for p in (cwd / "runs").iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    run = runs[0]
    assert (run / "run.yaml").is_file() and (run / "idps.csv").is_file()
    assert (run / "checkpoints" / "last.nne").is_file()
    return out.stdout, run


def history_rows(run: Path) -> int:
    return len((run / "idps.csv").read_text(encoding="utf-8").strip().splitlines()) - 1


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=_ids(YAML_BLOCKS))
def test_yaml_block_trains_with_nnjit_train(block, tmp_path):
    if block.skip:
        pytest.skip(f"{block.where}: {block.skip}")
    import yaml

    config = yaml.safe_load(block.code)
    assert isinstance(config, dict) and "model" in config, f"{block.where}: not a RunConfig"
    path = tmp_path / "config.yaml"
    path.write_text(block.code, encoding="utf-8")
    declared = int(config.get("train", {}).get("epochs", 100))
    cap = min(EPOCH_CAP, declared)
    start = time.perf_counter()
    stdout, run = train_config(path, tmp_path, cap)
    print(f"{block.where}: {cap} epochs in {time.perf_counter() - start:.1f} s")
    assert 1 <= history_rows(run) <= cap
    assert f"run runs/{run.name}" in stdout
    from nnjit.experiment import RunConfig

    ran = RunConfig.from_yaml((run / "run.yaml").read_text(encoding="utf-8"))
    assert ran == RunConfig.from_yaml(block.code), f"{block.where}: run.yaml differs"


# --- bash: every command of the shell blocks --------------------------------------------------


def shell_commands(block: Block) -> list[str]:
    """The commands of a shell block: one per line (backslash continuations joined), without
    comments and blank lines."""
    joined = block.code.replace("\\\n", " ")
    commands = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            commands.append(line)
    return commands


SHELL_BLOCKS = [b for b in ALL_BLOCKS if b.language == "bash"]


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=[b.where for b in SHELL_BLOCKS])
def test_shell_block_runs(block, tmp_path):
    """A shell block's commands run in order in one folder (a later command may use what an
    earlier one wrote), each with exit status 0."""
    if block.skip:
        pytest.skip(f"{block.where}: {block.skip}")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent),
                                                 os.environ.get("PATH", "")]))
    for command in shell_commands(block):
        start = time.perf_counter()
        out = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True,
                             text=True, timeout=PAGE_TIMEOUT, env=env)
        print(f"{block.where}: {shlex.quote(command)} in {time.perf_counter() - start:.1f} s")
        assert out.returncode == 0, f"{block.where}: {command}\n{out.stdout[-3000:]}\n" \
                                    f"{out.stderr[-3000:]}"


# --- the extractor itself ---------------------------------------------------------------------


def test_extractor_finds_blocks_and_markers(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n```python\nx = 1\n```\n\n<!-- docs-test: skip needs a GPU -->\n"
                    "```bash\nnvidia-smi \\\n  -L\n# a comment\n\n```\n```\nplain\n```\n",
                    encoding="utf-8")
    blocks = extract_blocks(page)
    assert [(b.language, b.line, b.skip) for b in blocks] == [
        ("python", 3, None), ("bash", 8, "needs a GPU"), ("", 14, None)]
    assert blocks[0].code == "x = 1\n"
    assert shell_commands(blocks[1]) == ["nvidia-smi    -L"]


def test_a_marker_without_reason_is_refused(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- docs-test: skip -->\n```python\nx = 1\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="docs-test: skip REASON"):
        extract_blocks(page)


def test_every_page_has_its_blocks_found():
    """Guards the extractor: the pages' code blocks are really collected."""
    languages = {(b.page.name, b.language) for b in ALL_BLOCKS}
    assert ("README.md", "python") in languages
    assert ("experiments.md", "yaml") in languages
    assert ("gnn.md", "yaml") in languages
    for page in PAGES:  # an indented fence (e.g. in a list) would be missed: refuse it
        words = re.findall(r"^[ \t]*```([A-Za-z]+)[ \t]*$", page.read_text(encoding="utf-8"),
                           flags=re.M)
        fenced = sorted(_LANGUAGES[w.lower()] for w in words if w.lower() in _LANGUAGES)
        found = sorted(b.language for b in ALL_BLOCKS
                       if b.page == page and b.language in _LANGUAGES.values())
        assert fenced == found, page.name
