"""Lazy imports of the ``export`` extra's packages, with an error that says how to install them."""

from __future__ import annotations

import importlib
from types import ModuleType

MSG_MISSING = ("{what} needs the '{package}' package, part of nnjit's 'export' extra: "
               "pip install 'nnjit[export]'")


def require(module: str, what: str) -> ModuleType:
    """Import ``module`` (e.g. ``"safetensors.numpy"``) or raise an ImportError naming the extra;
    ``what`` names the caller (``"save_onnx"``)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = module.split(".")[0]
        raise ImportError(MSG_MISSING.format(what=what, package=package)) from exc
