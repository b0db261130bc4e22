"""The YAML loader of every file nnjit reads (nnjit/experiment/safe_yaml.py): plain data, no
aliases, bounded nesting and size, bounded messages that name the file and line."""

from __future__ import annotations

import os
import re
import threading
import time
import tracemalloc
from pathlib import Path

import pytest
import yaml

from nnjit.experiment import RunConfig
from nnjit.experiment.safe_yaml import (
    MAX_YAML_BYTES,
    MAX_YAML_DEPTH,
    ConfigLoader,
    PlainLoader,
    YAMLLimitError,
    describe_yaml_error,
    load_yaml,
    read_yaml_file,
)

NNJIT = Path(__file__).resolve().parents[2] / "nnjit"


def billion_laughs(levels: int = 9) -> str:
    """A RunConfig whose ``data`` is nine nested aliases: 9**9 strings once expanded (388
    bytes; the same file made PyYAML + the config's error message take > 3.6 GB)."""
    names = "abcdefghijklmnopqrstuvwxyz"
    items = ['&a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        items.append(f"&{names[i]} [" + ",".join([f"*{names[i - 1]}"] * 9) + "]")
    return "model:\n  net: {in_dim: 4, out_dim: 3}\ndata: [\n  " + ",\n  ".join(items) + "]\n"


def test_billion_laughs_fails_fast_with_a_short_message_and_little_memory():
    text = billion_laughs()
    assert len(text.encode()) < 500
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(YAMLLimitError) as info:
            RunConfig.from_yaml(text, "laughs.yaml")
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(info.value)
    assert seconds < 0.5, seconds
    assert peak < 2 * 2**20, peak  # bytes: the parse stops at the first alias
    assert len(message) < 400, len(message)
    assert "found the alias *a" in message and "write the value out" in message
    assert '"laughs.yaml", line 5, column 7' in message
    assert describe_yaml_error(info.value).startswith("line 5, column 7: found the alias *a")


@pytest.mark.parametrize("text", [
    "a: &x 1\nb: *x\n",
    "base: &b {lr: 0.1}\noptimizer:\n  <<: *b\n",  # a merge key is an alias too
    "- &x [1]\n- [*x, *x]\n",
])
def test_every_alias_is_refused_at_its_line(text):
    with pytest.raises(YAMLLimitError, match=r"found the alias \*[xb]: aliases") as info:
        load_yaml(text, "f.yaml")
    assert info.value.problem_mark.line == text.count("\n", 0, text.index("*"))


def test_anchors_without_aliases_and_plain_data_load():
    assert load_yaml("a: &x 1\nb: [2, {c: d}]\n") == {"a": 1, "b": [2, {"c": "d"}]}
    assert load_yaml("") is None


def test_nesting_is_bounded():
    deep = "[" * MAX_YAML_DEPTH + "]" * MAX_YAML_DEPTH  # depth MAX_YAML_DEPTH: the limit
    assert load_yaml(deep) == eval(deep)  # noqa: S307 - a literal of empty lists
    too_deep = "[" * 100_000 + "]" * 100_000  # was a RecursionError (a traceback)
    with pytest.raises(YAMLLimitError, match=f"nested deeper than {MAX_YAML_DEPTH}"):
        load_yaml(too_deep[:MAX_YAML_BYTES // 2] + too_deep[-MAX_YAML_BYTES // 2:])
    block = "".join(f"{' ' * i}k{i}:\n" for i in range(40)) + " " * 40 + "v\n"
    with pytest.raises(YAMLLimitError, match="nested deeper"):
        load_yaml(block)


def test_size_is_bounded_for_text_and_files(tmp_path):
    with pytest.raises(YAMLLimitError, match=f"more than the {MAX_YAML_BYTES}"):
        load_yaml("#" * (MAX_YAML_BYTES + 1), "big.yaml")
    big = tmp_path / "big.yaml"
    with open(big, "wb") as fh:  # 1 GiB, sparse: reading it all would take seconds and memory
        fh.truncate(2**30)
    start = time.perf_counter()
    with pytest.raises(YAMLLimitError, match=f"larger than the {MAX_YAML_BYTES} bytes"):
        read_yaml_file(big)
    assert time.perf_counter() - start < 0.5


def test_devices_and_fifos_are_refused_without_reading_or_blocking(tmp_path):
    with pytest.raises(YAMLLimitError, match="/dev/zero is not a regular file"):
        read_yaml_file("/dev/zero")
    fifo = tmp_path / "run.yaml"
    os.mkfifo(fifo)
    outcome = []
    reader = threading.Thread(target=lambda: outcome.append(_error_of(read_yaml_file, fifo)),
                              daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert isinstance(outcome[0], YAMLLimitError) and "not a regular file" in str(outcome[0])


def _error_of(function, *args):
    try:
        function(*args)
    except Exception as e:  # noqa: BLE001 - the test inspects it
        return e
    return None


def test_file_errors_name_the_file_and_line(tmp_path):
    path = tmp_path / "cfg.yaml"
    path.write_text("model:\n  net: &n {in_dim: 1}\nother: *n\n")
    with pytest.raises(YAMLLimitError) as info:
        read_yaml_file(path, ConfigLoader)
    assert f'"{path}", line 3, column 8' in str(info.value)
    path.write_bytes(b"a: 1\nb: caf\xe9\n")
    with pytest.raises(yaml.reader.ReaderError) as info:
        read_yaml_file(path)
    assert describe_yaml_error(info.value) == "not UTF-8 text (invalid continuation byte at " \
                                              "byte offset 11)"
    with pytest.raises(FileNotFoundError):
        read_yaml_file(tmp_path / "missing.yaml")


def test_values_python_cannot_convert_and_long_tags_give_bounded_yaml_errors():
    with pytest.raises(yaml.constructor.ConstructorError, match="cannot convert '1111") as info:
        load_yaml("a: 1\nb: " + "1" * 5000 + "\n")  # beyond Python's int digit limit
    assert info.value.problem_mark.line == 1 and len(str(info.value)) < 500
    with pytest.raises(yaml.constructor.ConstructorError) as info:
        load_yaml("a: !" + "t" * 50_000 + " 1\n")  # PyYAML quotes the whole tag
    assert len(str(info.value)) < 600 and "(50" in str(info.value)
    assert len(describe_yaml_error(info.value)) < 300


def test_config_floats_are_yaml_1_2_and_other_files_keep_yaml_1_1():
    assert load_yaml("lr: 1e-3\n", loader=ConfigLoader) == {"lr": 0.001}
    assert load_yaml("commit: 1234e567\n", loader=PlainLoader) == {"commit": "1234e567"}


def test_python_tags_are_refused():
    with pytest.raises(yaml.constructor.ConstructorError, match="python/object/apply"):
        load_yaml("!!python/object/apply:os.system ['echo pwned']\n")


def test_nnjit_reads_yaml_only_through_the_safe_loader():
    """No module but safe_yaml.py parses YAML itself (a new reader would skip the limits)."""
    parse = re.compile(r"yaml\.(load|safe_load|full_load|unsafe_load|load_all|safe_load_all|"
                       r"parse|compose|SafeLoader|Loader|CLoader|CSafeLoader|FullLoader)\b")
    offenders = [f"{path.relative_to(NNJIT.parent)}:{n}"
                 for path in NNJIT.rglob("*.py") if path.name != "safe_yaml.py"
                 for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if parse.search(line)]
    assert offenders == []
