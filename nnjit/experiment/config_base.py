"""What every experiment config shares: validation helpers, ``state``/``from_state``, YAML, the
config hash. The configs are in :mod:`nnjit.experiment.config` (and :class:`NetConfig` in
:mod:`nnjit.experiment.nets`); the rules they follow are described there.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import MISSING, fields
from typing import Any, ClassVar

import yaml

from nnjit.checks import Param
from nnjit.experiment.builder_enum import BuilderEnum
from nnjit.experiment.excerpt import bounded_message, excerpt
from nnjit.experiment.safe_yaml import ConfigLoader, load_yaml

__all__ = ["HASH_LENGTH", "Config", "check_field", "field_default", "plain"]

#: Length of :meth:`config_hash` in hex digits (48 bits: collisions need ~16 million runs).
HASH_LENGTH = 12


#: Unknown keys an error message lists at most.
_MAX_LISTED_KEYS = 10


def check_field(param: Param, where: str, value: Any) -> Any:
    """``param.check(where, value)`` whose error quotes a bounded excerpt of ``value``."""
    try:
        return param.check(where, value)
    except ValueError as e:
        message = str(e)
        if not message.startswith(where):  # repr(value) itself failed: an int of > 4300 digits
            message = f"{where} must be {param.describe()}, got {excerpt(value)}"
        raise ValueError(bounded_message(message, value)) from None


def plain(value: Any, full: bool = False) -> Any:
    """A value as plain YAML/JSON data (a config's :meth:`Config.state`, ``full`` or not)."""
    if isinstance(value, Config):
        return value.state(full)
    if isinstance(value, BuilderEnum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [plain(v, full) for v in value]
    return value


def field_default(f: dataclasses.Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


class Config:
    """Shared behaviour: state/from_state, YAML, hashing, replace. Subclasses are dataclasses."""

    #: Fields holding another config; ``from_state`` builds them from mappings.
    _nested: ClassVar[dict[str, type]] = {}

    # -- validation helpers (used in __post_init__) ----------------------------------------------
    def _where(self, name: str) -> str:
        return f"{type(self).__name__}.{name}"

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def _param(self, name: str, param: Param) -> None:
        self._set(name, check_field(param, self._where(name), getattr(self, name)))

    def _enum(self, name: str, enum: type[BuilderEnum], none_ok: bool = False) -> None:
        value = getattr(self, name)
        if value is None and none_ok:
            return
        try:
            self._set(name, enum.get(value))
        except ValueError as e:
            raise ValueError(bounded_message(f"{self._where(name)}: {e}", value)) from None

    def _config(self, name: str, cls: type, none_ok: bool = False) -> None:
        value = getattr(self, name)
        if not (isinstance(value, cls) or (value is None and none_ok)):
            article = "an" if cls.__name__[0] in "AEIOU" else "a"
            raise ValueError(f"{self._where(name)} must be {article} {cls.__name__}"
                             f"{' or None' if none_ok else ''}, got {type(value).__name__} "
                             f"(use {type(self).__name__}.from_state to build from a mapping)")

    # -- serialisation ---------------------------------------------------------------------------
    def state(self, full: bool = False) -> dict[str, Any]:
        """Plain, YAML-safe dict of the fields that differ from their defaults (what the
        :meth:`config_hash` covers), or with ``full`` of every field, defaults included (what
        a run folder records: everything that made the run)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            default = field_default(f)
            if not full and default is not MISSING and value == default:
                continue
            out[f.name] = plain(value, full)
        return out

    @classmethod
    def from_state(cls, state: Mapping[str, Any]):
        """Rebuild a config from :meth:`state` (missing fields take their defaults).

        Raises:
            ValueError: not a mapping, an unknown or missing key, or an invalid value.
        """
        if not isinstance(state, Mapping):
            raise ValueError(f"{cls.__name__}.from_state expects a mapping, got "
                             f"{type(state).__name__}")
        names = [f.name for f in fields(cls)]
        unknown = [k for k in state if k not in names]
        if unknown:
            listed = ", ".join(excerpt(k, 40) for k in unknown[:_MAX_LISTED_KEYS])
            more = len(unknown) - _MAX_LISTED_KEYS
            raise ValueError(f"{cls.__name__}: unknown key{'s' if len(unknown) > 1 else ''} "
                             f"{listed}{f' and {more} more' if more > 0 else ''}; valid keys: "
                             f"{', '.join(names)}")
        missing = [f.name for f in fields(cls)
                   if field_default(f) is MISSING and f.name not in state]
        if missing:
            raise ValueError(f"{cls.__name__}: missing required key"
                             f"{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}")
        kwargs = dict(state)
        for name, sub in cls._nested.items():
            if isinstance(kwargs.get(name), Mapping):
                kwargs[name] = sub.from_state(kwargs[name])
        return cls(**kwargs)

    def to_yaml(self, full: bool = False) -> str:
        """:meth:`state` (``full``: defaults included) as YAML (``yaml.safe_dump``; fields in
        declaration order)."""
        return yaml.safe_dump(self.state(full), sort_keys=False, default_flow_style=None)

    @classmethod
    def from_yaml(cls, text: str, name: str = "<config>"):
        """Parse YAML text with :class:`~nnjit.experiment.safe_yaml.ConfigLoader` and
        :meth:`from_state` it (``name``, e.g. the file's path, is how YAML errors call it).

        Raises:
            yaml.YAMLError: not valid YAML, or refused by the loader (an alias, deep nesting,
                over 64 KiB: :class:`~nnjit.experiment.safe_yaml.YAMLLimitError`).
            ValueError: not a valid config.
        """
        data = load_yaml(text, name, ConfigLoader)
        return cls.from_state({} if data is None else data)

    def config_hash(self) -> str:
        """Stable short id: the first :data:`HASH_LENGTH` hex digits of the sha256 of the
        canonical JSON (sorted keys, no spaces) of :meth:`state`."""
        canonical = json.dumps(self.state(), sort_keys=True, separators=(",", ":"),
                               ensure_ascii=True, allow_nan=False)
        return hashlib.sha256(canonical.encode("ascii")).hexdigest()[:HASH_LENGTH]

    def replace(self, **changes):
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)


