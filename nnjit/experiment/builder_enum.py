"""The base of nnjit's enums: string values, forgiving lookup, members that build what they name.

Every member's value is a lowercase string (``Optims.ADAM == "adam"``); that string is what configs
and YAML files hold. Lookup by value or by member name is case-insensitive and accepts ``-`` for
``_``. A member is declared as ``NAME = "value", builder``; calling the member runs the builder.
The enums themselves are in :mod:`nnjit.experiment.enums` (and :mod:`nnjit.experiment.nets`).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any

from nnjit.experiment.excerpt import excerpt

__all__ = ["BuilderEnum"]


class BuilderEnum(str, Enum):
    """Base class: string values, forgiving lookup, members that build what they name."""

    def __new__(cls, value: str, builder: Any = None):
        member = str.__new__(cls, value)
        member._value_ = value
        member._builder = builder
        return member

    @classmethod
    def _missing_(cls, value):
        if isinstance(value, str):
            key = value.strip().lower().replace("-", "_")
            for member in cls:
                if key in (member.value, member.name.lower()):
                    return member
        raise ValueError(f"Unknown {cls.__name__} name {excerpt(value)}; valid names: "
                         f"{', '.join(repr(m.value) for m in cls)}")

    @classmethod
    def get(cls, identifier):
        """The member named ``identifier`` (a member, its value or its name, any case).

        Raises:
            ValueError: unknown name; the message lists the valid ones.
        """
        if isinstance(identifier, cls):
            return identifier
        return cls(identifier)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The valid values, in definition order."""
        return tuple(m.value for m in cls)

    @property
    def builder(self) -> Callable:
        """What calling the member runs (usually the class it names)."""
        return self._builder

    def __call__(self, *args, **kwargs):
        """Build the object this member names, passing the arguments through."""
        return self._builder(*args, **kwargs)

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)
