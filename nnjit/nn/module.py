"""``Module``: the base class of every layer and model (PyTorch conventions).

Parameters and sub-modules are registered by attribute assignment and named by dotted paths
(``encoder.0.weight``) everywhere: state dicts, checkpoints, error messages. ``forward(self, x)``
and the seed engine's ``forward(self, tape, x)`` both work; ``forward`` runs once, on symbolic
tensors, when a trainer compiles the model.
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from typing import Iterator

import numpy as np

from nnjit.graph.tape import Symbolic, Tape, current_tape
from nnjit.nn.parameter import Parameter

MSG_NO_SUPER_INIT = (
    "{cls}.__init__ must call super().__init__() before assigning parameters or layers, "
    "so that they can be registered."
)


class Module:
    """Base class for layers and models.

    Example:
        >>> import nnjit as nn
        >>> class Net(nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.fc1 = nn.Linear(4, 16)
        ...         self.fc2 = nn.Linear(16, 3)
        ...     def forward(self, x):
        ...         return self.fc2(nn.functional.relu(self.fc1(x)))
    """

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_provisional", set())
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_path", "")
        object.__setattr__(self, "_trainer", None)

    # -- registration --------------------------------------------------------------------------
    def _check_init(self) -> None:
        if "_parameters" not in self.__dict__:
            raise RuntimeError(MSG_NO_SUPER_INIT.format(cls=type(self).__name__))

    def __setattr__(self, name, value):
        if isinstance(value, (Parameter, Module)):
            self._check_init()
            self.__dict__.pop(name, None)
            self._parameters.pop(name, None)
            self._modules.pop(name, None)
            if isinstance(value, Parameter):
                self._parameters[name] = value
            else:
                for key in [k for k in self._provisional if self._modules.get(k) is value]:
                    self._modules.pop(key)
                    self._provisional.discard(key)
                self._modules[name] = value
        else:
            if "_parameters" in self.__dict__:
                self._parameters.pop(name, None)
                self._modules.pop(name, None)
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        if "_parameters" in d and name in d["_parameters"]:
            return d["_parameters"][name]
        if "_modules" in d and name in d["_modules"]:
            return d["_modules"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Register ``param`` under ``name`` (rejects empty, dotted or clashing names)."""
        self._check_init()
        _check_name(self, name, "parameter")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign {type(param).__name__} as parameter '{name}'")
        if param is not None:
            self._parameters[name] = param

    def add_module(self, *args):
        """Register a sub-module: ``add_module(name, module)`` (PyTorch) or ``add_module(module)``.

        The one-argument form (the inspiring engine's ``self.fc1 = self.add_module(layer)``)
        returns the module; assigning it to an attribute then names it after the attribute.
        """
        self._check_init()
        if len(args) == 2:
            name, module = args
            _check_name(self, name, "module")
        elif len(args) == 1:
            (module,) = args
            name = f"_m{len(self._modules)}"
            self._provisional.add(name)
        else:
            raise TypeError("add_module takes (name, module) or (module)")
        if not isinstance(module, Module):
            raise TypeError(f"add_module expects a Module, got {type(module).__name__}")
        self._modules[name] = module
        return module

    # -- traversal -----------------------------------------------------------------------------
    def named_modules(self, prefix: str = "", memo: set | None = None) -> Iterator[tuple[str, Module]]:
        """Yield ``(dotted_path, module)`` for this module and all descendants, each once."""
        self._check_init()
        yield from walk_modules(self, prefix, memo)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def children(self) -> Iterator[Module]:
        yield from self._modules.values()

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        """Yield ``(dotted_name, parameter)`` in registration order, shared ones once."""
        seen = set()
        for path, module in self.named_modules(prefix):
            for name, p in module._parameters.items():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{path}.{name}" if path else name), p

    def parameters(self) -> list[Parameter]:
        return [p for _, p in self.named_parameters()]

    def num_parameters(self) -> int:
        """Total number of trainable scalars."""
        return sum(p.size for p in self.parameters())

    # -- modes ---------------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode (dropout active) on this module and its descendants."""
        mode = bool(mode)
        for m in self.modules():
            m.__dict__["training"] = mode
        return self

    def eval(self) -> Module:
        """Set evaluation mode (dropout off)."""
        return self.train(False)

    # -- calling -------------------------------------------------------------------------------
    def forward(self, *args):
        raise NotImplementedError(f"{type(self).__name__} must implement forward()")

    def __call__(self, *args):
        # Runs once per module per trace; kept lean (it is most of a small model's set-up time).
        if args and type(args[0]) is Tape:
            tape, args = args[0], args[1:]
        else:
            tape = current_tape()
        if tape is None and args and isinstance(args[0], Symbolic):
            tape = args[0].tape
        symbolic = tape is not None
        for a in args:  # (a loop: all() over a generator costs a generator per call)
            symbolic = symbolic and isinstance(a, Symbolic)
        if not symbolic:
            self._check_init()
            raise TypeError(
                f"{type(self).__name__} is called on symbolic tensors while a trainer traces "
                "the model; to run it on data use Trainer.predict(X) or model.predict(X)"
            )
        if _takes_tape(type(self)):
            args = (tape,) + args
        owners = tape.owners
        owners.append(self.__dict__.get("_path") or type(self).__name__)
        try:
            return self.forward(*args)
        finally:
            owners.pop()

    # -- state ---------------------------------------------------------------------------------
    def state_dict(self) -> OrderedDict[str, np.ndarray]:
        """Copies of all parameters by dotted name."""
        return OrderedDict((n, np.array(p.data, copy=True)) for n, p in self.named_parameters())

    def load_state_dict(self, state, where: str = "state dict") -> None:
        """Copy arrays into the parameters, after checking names and shapes all at once.

        Raises:
            StateMismatchError: listing every missing, unexpected and mis-shaped entry.
        """
        from nnjit.train.nne import check_state

        params = OrderedDict(self.named_parameters())
        check_state({n: p.shape for n, p in params.items()}, state, where=where)
        for name, p in params.items():
            p.data[...] = np.asarray(state[name], dtype=p.data.dtype)

    def save_weights(self, path) -> None:
        """Write all parameters to a ``.nne`` file (atomically)."""
        from nnjit.train.checkpoint import save_module

        save_module(self, path)

    def load_weights(self, path) -> None:
        """Load parameters from a ``.nne`` file written by :meth:`save_weights`."""
        from nnjit.train.checkpoint import load_module

        load_module(self, path)

    def save_safetensors(self, path) -> None:
        """Write all parameters to a safetensors file with PyTorch's names and layouts, which
        ``torch.nn.Module.load_state_dict`` reads (needs ``pip install 'nnjit[export]'``)."""
        from nnjit.export.safetensors_io import save_safetensors

        save_safetensors(self, path)

    def load_safetensors(self, path) -> None:
        """Load parameters from a safetensors file with PyTorch's names and layouts (e.g. a
        ``torch.nn.Sequential``'s ``state_dict`` saved by ``safetensors.torch.save_file``).

        Names, shapes and dtypes are checked first and every mismatch is listed in one
        :class:`~nnjit.export.SafetensorsMismatchError`; nothing changes unless all match.
        """
        from nnjit.export.safetensors_io import load_safetensors

        load_safetensors(self, path)

    def save_onnx(self, path, input_shape=None) -> None:
        """Export this feed-forward model as ONNX (opset 17, dynamic batch): input ``"input"``,
        output ``"output"``, the raw outputs as ``Trainer.predict_outputs`` gives them.

        Args:
            path: the ``.onnx`` file to write (atomically).
            input_shape: ``(None, n_features)``; by default the first ``Linear``'s width.

        Raises:
            NotImplementedError: naming the layer, for graph layers and Python ops.
        """
        from nnjit.export.onnx_export import save_onnx

        save_onnx(self, path, input_shape)

    def predict(self, X) -> np.ndarray:
        """The network's outputs for ``X`` (needs a trainer that compiled this model)."""
        if self._trainer is None:
            raise RuntimeError(
                f"{type(self).__name__}.predict() needs a compiled model: create "
                "Trainer(model, optimizer, loss) (alias JITCompiler) and call fit() first"
            )
        return self._trainer.predict_outputs(X)

    # -- display -------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"  ({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n" + "\n".join(lines) + "\n)"


def walk_modules(root: Module, prefix: str = "", memo: set | None = None) -> list:
    """``[(dotted_path, module)]`` for ``root`` and all its descendants, each once, depth-first
    with children in registration order (:meth:`Module.named_modules` as a list; a trainer
    walks the model once per trace)."""
    memo = set() if memo is None else memo
    out = []
    stack = [(prefix, root)]
    while stack:
        path, module = stack.pop()
        if id(module) in memo:
            continue
        memo.add(id(module))
        out.append((path, module))
        children = module._modules
        if children:
            names = list(children)
            names.reverse()
            for name in names:
                stack.append((f"{path}.{name}" if path else name, children[name]))
    return out


def _check_name(module: Module, name, kind: str) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
    if not name:
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain ".", got "{name}"')
    if name in module.__dict__ or (name in module._parameters and kind == "module") or (
        name in module._modules and kind == "parameter"
    ):
        raise KeyError(f"attribute '{name}' already exists")


_TAKES_TAPE: dict[type, bool] = {}


def _takes_tape(cls: type) -> bool:
    """True for the seed engine's ``forward(self, tape, x)`` signature."""
    if cls not in _TAKES_TAPE:
        params = list(inspect.signature(cls.forward).parameters)
        _TAKES_TAPE[cls] = len(params) >= 2 and params[1] == "tape"
    return _TAKES_TAPE[cls]
