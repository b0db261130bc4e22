"""Reading YAML that nnjit did not write itself: configs, ``run.yaml``, ``metadata.yaml``.

A YAML file is untrusted input. nnjit reads every one with :class:`PlainLoader`: PyYAML's
``SafeLoader`` (plain data only; no tag builds a Python object) with limits that keep a small
file from taking unbounded time or memory:

- **no aliases** (``*name``). Nested aliases expand exponentially: a 388-byte config of nine
  nested aliases (a "billion laughs") is a list of 9**9 items, whose error message alone took
  gigabytes. Anchors (``&name``) without aliases are harmless and accepted.
- at most :data:`MAX_YAML_DEPTH` nested lists and mappings (a config has 3);
- at most :data:`MAX_YAML_BYTES` bytes: a config is under 2 KB, and PyYAML's pure-Python parser
  needs about a second for 64 KiB of adversarial YAML on a busy machine.

A refused file raises :class:`YAMLLimitError`; every YAML error (a ``yaml.MarkedYAMLError``)
names the file, line and column, and quotes at most
:data:`~nnjit.experiment.excerpt.EXCERPT_CHARS` characters of it.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any

import yaml
import yaml.constructor
import yaml.reader

from nnjit.experiment.excerpt import EXCERPT_CHARS, excerpt

__all__ = ["MAX_YAML_BYTES", "MAX_YAML_DEPTH", "ConfigLoader", "PlainLoader", "YAMLLimitError",
           "describe_yaml_error", "load_yaml", "read_yaml_file"]

#: Largest YAML text or file nnjit reads, in characters (text) or bytes (file).
MAX_YAML_BYTES = 64 * 1024
#: Deepest nesting of lists and mappings nnjit reads.
MAX_YAML_DEPTH = 32


class YAMLLimitError(yaml.MarkedYAMLError):
    """Valid YAML that nnjit refuses: an alias, nesting deeper than :data:`MAX_YAML_DEPTH`, a
    text longer than :data:`MAX_YAML_BYTES`, or a path that is not a regular file."""


class PlainLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses aliases and nesting deeper than
    :data:`MAX_YAML_DEPTH` (:class:`YAMLLimitError` at the offending line), and turns a value
    Python cannot convert (an int of more than 4300 digits) into a ``ConstructorError``."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise YAMLLimitError(
                None, None, f"found the alias *{excerpt(event.anchor, 40)[1:-1]}: aliases "
                "(*name) are not allowed in nnjit's YAML files; write the value out in full",
                event.start_mark)
        if self._depth >= MAX_YAML_DEPTH:
            raise YAMLLimitError(None, None, f"lists and mappings nested deeper than "
                                 f"{MAX_YAML_DEPTH} levels", event.start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as e:  # e.g. int() beyond Python's digit limit
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot convert {excerpt(node.value, 40)}: {e}",
                node.start_mark) from None


class ConfigLoader(PlainLoader):
    """:class:`PlainLoader` that also reads ``1e-3`` and ``1E5`` as floats (YAML 1.2), for
    configs and ``run.yaml`` (other files keep YAML 1.1, where ``1e5`` is a string)."""


ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _clip(text: str | None) -> str | None:
    if text is None or len(text) <= EXCERPT_CHARS:
        return text
    return text[:EXCERPT_CHARS] + f"... ({len(text)} characters)"


def load_yaml(text: str, name: str = "<string>", loader: type[PlainLoader] = PlainLoader) -> Any:
    """The data of one YAML document ``text`` (``name``: how errors call it, e.g. its path).

    Raises:
        yaml.YAMLError: not valid YAML, or refused (:class:`YAMLLimitError`); its marks name
            ``name``, its message is bounded.
    """
    if len(text) > MAX_YAML_BYTES:
        raise YAMLLimitError(None, None, f"{name} has {len(text)} characters, more than the "
                             f"{MAX_YAML_BYTES} nnjit reads from a YAML file")
    reader = loader(text)
    reader.name = name  # the Mark of every error carries this
    try:
        return reader.get_single_data()
    except yaml.MarkedYAMLError as e:  # PyYAML quotes tags and values in full
        e.problem, e.context = _clip(e.problem), _clip(e.context)
        raise
    finally:
        reader.dispose()


def read_yaml_file(path, loader: type[PlainLoader] = PlainLoader) -> Any:
    """The data of the YAML file ``path``, read with the limits of :func:`load_yaml`; a path
    that is not a regular file (a FIFO, a device such as ``/dev/zero``) or has more than
    :data:`MAX_YAML_BYTES` bytes is refused without reading it all.

    Raises:
        OSError: cannot open or read it.
        yaml.YAMLError: not UTF-8 (``ReaderError``), not valid YAML, or refused.
    """
    name = os.fspath(path)
    fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not block
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise YAMLLimitError(None, None, f"{name} is not a regular file")
        data = fh.read(MAX_YAML_BYTES + 1)
    if len(data) > MAX_YAML_BYTES:
        raise YAMLLimitError(None, None, f"{name} is larger than the {MAX_YAML_BYTES} bytes "
                             "nnjit reads from a YAML file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise yaml.reader.ReaderError(name, e.start, data[e.start:e.start + 1], "utf-8",
                                      e.reason) from None
    return load_yaml(text, name, loader)


def describe_yaml_error(error: yaml.YAMLError) -> str:
    """One bounded line: ``line L, column C: <problem>`` (or the problem alone)."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    if isinstance(error, yaml.reader.ReaderError):
        problem = (f"not UTF-8 text ({error.reason} at byte offset {error.position})"
                   if isinstance(error.character, bytes) else
                   f"character #x{error.character:04x} at position {error.position}: "
                   f"{error.reason}")
    context = getattr(error, "context", None)
    text = f"{context}: {problem}" if context and mark is not None else problem
    at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return " ".join(_clip(f"{at}{text}").split())
