"""``Module``: the base class of every layer and model (PyTorch conventions).

Parameters and sub-modules are registered by attribute assignment and named by dotted paths
(``encoder.0.weight``) everywhere: state dicts, checkpoints, error messages. ``forward(self, x)``
and the seed engine's ``forward(self, tape, x)`` both work; ``forward`` runs once, on symbolic
tensors, when a trainer compiles the model.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Iterator, NamedTuple

import numpy as np

from nnjit.io.nne import check_state
from nnjit.io.weights import load_module, save_module
from nnjit.nn.buffer import Buffer
from nnjit.nn.parameter import Parameter
from nnjit.nn.providers import provider
from nnjit.nn.summary import summary_table
from nnjit.nn.trace import takes_tape
from nnjit.nn.walk import walk_modules
from nnjit.tape.tape import Symbolic, Tape, current_tape

MSG_DATA_CALL = (
    "{cls} was called with no arguments: on data, call the model with an array of shape "
    "(N, in_features) (one per input of forward), or a Graph for graph models (model(X) is "
    "model.predict(X))"
)
MSG_DATA_KEYWORDS = (
    "{cls} was called on data with keyword arguments ({names}): on data, pass one array per "
    "input of forward, in order: model(X_a, X_b)"
)
MSG_ARRAY_IN_TRACE = (
    "{cls} was called on arrays while the model is being traced: forward must pass on the "
    "tensors it receives (array data goes to model(X), model.predict(X) or Trainer.predict(X))"
)
MSG_NO_SUPER_INIT = (
    "{cls}.__init__ must call super().__init__() before assigning parameters or layers, "
    "so that they can be registered."
)


class IncompatibleKeys(NamedTuple):
    """What :meth:`Module.load_state_dict` did not load (PyTorch's ``_IncompatibleKeys``)."""

    missing_keys: list[str]
    unexpected_keys: list[str]


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

    #: True for graph layers (:class:`nnjit.nn.gnn.MessagePassing`), whose ``forward`` takes the
    #: graph's edges: a model holding one is traced on a Graph.
    takes_edges: bool = False

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
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
        buffers = self.__dict__.get("_buffers")
        if buffers is not None and name in buffers and not isinstance(value, (Parameter, Module)):
            self._set_buffer(name, value)
            return
        if isinstance(value, (Parameter, Module)):
            self._check_init()
            self.__dict__.pop(name, None)
            self._parameters.pop(name, None)
            self._modules.pop(name, None)
            self._buffers.pop(name, None)
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
        if "_buffers" in d and name in d["_buffers"]:
            return d["_buffers"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._modules:
            del self._modules[name]
        elif name in self.__dict__.get("_buffers", ()):
            del self._buffers[name]
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

    def register_buffer(self, name: str, tensor, persistent: bool = True) -> None:
        """Register a state array that is not trained (PyTorch's ``register_buffer``), e.g. batch
        norm's running statistics: ``self.<name>`` returns it as a :class:`Buffer`.

        Buffers are saved by :meth:`state_dict` (after the module's own parameters, as in
        PyTorch; not when ``persistent=False``), ``.nne`` files and checkpoints, and live in
        the trainer's parameter block (best-weight snapshots restore them) but take no gradient
        and no optimizer step: only the ops that own them change them. An integer array is
        stored as floats (the arena's dtype). ``tensor=None`` registers a name with no buffer.
        Assigning an array to ``self.<name>`` later replaces the buffer's values.
        """
        self._check_init()
        _check_name(self, name, "buffer")
        if tensor is not None and isinstance(tensor, (Parameter, Module)):
            raise TypeError(f"cannot assign {type(tensor).__name__} as buffer '{name}' "
                            "(an array or None)")
        self._buffers[name] = None if tensor is None else Buffer(
            tensor.data if isinstance(tensor, Buffer) else tensor, persistent)

    def _set_buffer(self, name: str, value) -> None:
        """``self.<name> = value`` for a registered buffer: None, a Buffer, or new values."""
        old = self._buffers[name]
        if value is None or isinstance(value, Buffer):
            self._buffers[name] = value
        elif old is not None and np.shape(value) == old.shape:  # in place: stays in the arena
            old.data[...] = value
        else:
            self._buffers[name] = Buffer(value, old.persistent if old is not None else True)

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

    def named_buffers(self, prefix: str = "") -> Iterator[tuple[str, Buffer]]:
        """Yield ``(dotted_name, buffer)`` for every registered buffer (None ones skipped),
        module by module in :meth:`named_modules` order, shared ones once."""
        seen = set()
        for path, module in self.named_modules(prefix):
            for name, b in module.__dict__.get("_buffers", {}).items():
                if b is not None and id(b) not in seen:
                    seen.add(id(b))
                    yield (f"{path}.{name}" if path else name), b

    def buffers(self) -> list[Buffer]:
        return [b for _, b in self.named_buffers()]

    def num_parameters(self) -> int:
        """Total number of trainable scalars (buffers not included)."""
        return sum(p.size for p in self.parameters())

    # -- modes ---------------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode on this module and its descendants; returns the module.

        The flag is what PyTorch's is, but nnjit's trainer sets the mode of each batch itself:
        ``fit`` runs training batches in training mode (dropout active, batch norm on batch
        statistics, updating its running ones) and validation batches in evaluation mode;
        ``evaluate``, ``predict`` and ``model(X)`` run in evaluation mode; ``gradients`` in
        training mode. None of them changes the flag the user set.
        """
        mode = bool(mode)
        for m in self.modules():
            m.__dict__["training"] = mode
        return self

    def eval(self) -> Module:
        """Set evaluation mode (``train(False)``; see :meth:`train`)."""
        return self.train(False)

    # -- calling -------------------------------------------------------------------------------
    def forward(self, *args):
        raise NotImplementedError(f"{type(self).__name__} must implement forward()")

    def __call__(self, *args, **kwargs):
        """During a trace (``forward`` on symbolic tensors): record this module's ops
        (keyword arguments go to ``forward``: ``lstm(x, lengths=lengths)``).

        On data, ``model(X)`` returns the raw outputs ``(N, out_features)`` of the compiled
        forward, as :meth:`predict` does: in evaluation (dropout off, no gradients) whatever
        ``model.training`` says, which stays as it is; PyTorch's
        ``with torch.no_grad(): model.eval()(x)``. ``X`` is an ``(N, in_features)`` array
        (``model(X_num, X_cat)`` for a model with several inputs), or a
        :class:`~nnjit.data.graph.Graph` for graph models.
        """
        # Runs once per module per trace; kept lean (it is most of a small model's set-up time).
        if args and type(args[0]) is Tape:
            tape, args = args[0], args[1:]
        else:
            tape = current_tape()
        if tape is None and args and isinstance(args[0], Symbolic):
            tape = args[0].tape
        symbolic = tape is not None
        for a in args:  # (a loop: all() over a generator costs a generator per call)
            symbolic = symbolic and (isinstance(a, Symbolic) or _optional_or_group(a))
        if not symbolic:
            self._check_init()
            cls = type(self).__name__
            if tape is not None:
                raise TypeError(MSG_ARRAY_IN_TRACE.format(cls=cls))
            if not args:
                raise TypeError(MSG_DATA_CALL.format(cls=cls))
            if kwargs:
                raise TypeError(MSG_DATA_KEYWORDS.format(cls=cls, names=", ".join(kwargs)))
            # data, not a trace: the compiled forward (one array per input of forward)
            return self._inference_trainer()._outputs(args[0] if len(args) == 1 else args,
                                                      f"{cls}(X)")
        if takes_tape(type(self)):
            args = (tape,) + args
        owners = tape.owners
        owners.append(self.__dict__.get("_path") or type(self).__name__)
        try:
            out = self.forward(*args, **kwargs) if kwargs else self.forward(*args)
        finally:
            owners.pop()
        if tape.module_outputs is not None:  # (Module.summary's output shapes)
            tape.module_outputs[id(self)] = out
        return out

    # -- state ---------------------------------------------------------------------------------
    def state_dict(self) -> OrderedDict[str, np.ndarray]:
        """Copies of all parameters and persistent buffers by dotted name: module by module,
        each module's parameters then its buffers (PyTorch's order)."""
        return OrderedDict((n, np.array(t.data, copy=True)) for n, t in self._state_entries())

    def _state_entries(self) -> list[tuple[str, Parameter | Buffer]]:
        """``(dotted_name, Parameter or Buffer)`` of everything :meth:`state_dict` holds."""
        out, seen = [], set()
        for path, module in self.named_modules():
            own = list(module._parameters.items())
            own += [(n, b) for n, b in module.__dict__.get("_buffers", {}).items()
                    if b is not None and b.persistent]
            for name, t in own:
                if id(t) not in seen:
                    seen.add(id(t))
                    out.append((f"{path}.{name}" if path else name, t))
        return out

    def load_state_dict(self, state, strict: bool = True, *,
                        where: str = "state dict") -> IncompatibleKeys:
        """Copy arrays into the parameters and persistent buffers, after checking names and
        shapes all at once.

        Args:
            state: ``{dotted_name: array}``, e.g. another model's :meth:`state_dict`.
            strict: when True (default), every parameter and persistent buffer must be in
                ``state`` and every key of ``state`` must be one. When False, the parameters named in ``state`` are
                loaded and the others keep their values; missing and unexpected keys are
                returned, not raised (PyTorch's ``strict=False``).
            where: what ``state`` came from, named in errors (e.g. a file path).

        Returns:
            ``IncompatibleKeys(missing_keys, unexpected_keys)``, lists of names (both empty
            after a strict load), as PyTorch returns.

        Raises:
            StateMismatchError: listing every mis-shaped entry (with ``strict=False`` too, as in
                PyTorch) and, when strict, every missing and unexpected key. Nothing is loaded
                then.
        """
        params = OrderedDict(self._state_entries())
        missing = [n for n in params if n not in state]
        unexpected = [k for k in state if k not in params]
        expected = {n: p.shape for n, p in params.items() if strict or n in state}
        check_state(expected, state if strict else {k: state[k] for k in expected}, where=where)
        arrays = {n: np.asarray(state[n], dtype=params[n].data.dtype) for n in expected}
        for name, array in arrays.items():  # (converted first: a failure changes nothing)
            params[name].data[...] = array
        return IncompatibleKeys(missing, unexpected)  # (both empty after a strict load)

    def save_weights(self, path) -> None:
        """Write all parameters and persistent buffers (:meth:`state_dict`) to a ``.nne`` file
        (atomically)."""
        save_module(self, path)

    def load_weights(self, path) -> None:
        """Load parameters and buffers from a ``.nne`` file written by :meth:`save_weights` (or
        a checkpoint).

        Nothing changes unless every entry matches.

        Raises:
            NNEFormatError: the file is not a valid ``.nne`` file, has no ``params`` group, or a
                parameter is not float32/float64; the message names the file and the tensor.
            StateMismatchError: every missing, unexpected or mis-shaped parameter, at once.
            OSError: the file cannot be read.
        """
        load_module(self, path)

    def save_safetensors(self, path) -> None:
        """Write all parameters to a safetensors file with PyTorch's names and layouts, which
        ``torch.nn.Module.load_state_dict`` reads (needs ``pip install 'nnjit[export]'``)."""
        provider("save_safetensors", f"{type(self).__name__}.save_safetensors")(self, path)

    def load_safetensors(self, path) -> None:
        """Load parameters from a safetensors file with PyTorch's names and layouts (e.g. a
        ``torch.nn.Sequential``'s ``state_dict`` saved by ``safetensors.torch.save_file``).

        Names, shapes and dtypes are checked first and every mismatch is listed in one
        :class:`~nnjit.export.SafetensorsMismatchError`; nothing changes unless all match.
        """
        provider("load_safetensors", f"{type(self).__name__}.load_safetensors")(self, path)

    def save_onnx(self, path, input_shape=None) -> None:
        """Export this model as ONNX (dynamic batch; opset 17, 18 for SAGE max and GAT): input
        ``"input"``, output ``"output"``, the raw outputs as ``Trainer.predict_outputs`` gives
        them; a graph model takes ``"x"`` and ``"edge_index"`` (:func:`nnjit.export.save_onnx`
        says what maps to which ONNX ops).

        Args:
            path: the ``.onnx`` file to write (atomically).
            input_shape: ``(None, n_features)``, ``(None, C, H, W)``, ...; by default the shape
                the model's trainer compiled it for, else the first ``Linear``'s width.

        Raises:
            NotImplementedError: naming the layer and the op, for Python ops.
        """
        provider("save_onnx", f"{type(self).__name__}.save_onnx")(self, path, input_shape)

    def predict(self, X) -> np.ndarray:
        """The network's raw outputs for ``X`` (logits for a classifier), in evaluation mode.

        Needs no fit: works on fresh initial weights, after :meth:`load_weights` or
        :meth:`load_state_dict`, and after training. It runs the compiled forward of the
        :class:`~nnjit.train.trainer.Trainer` that last laid this model out (the one that fit
        it), or, when there is none, of an internal ``Trainer(model)`` made on the first call:
        float32, no loss assumed (so raw outputs, never labels), seed 0 (it draws nothing from
        :func:`nnjit.set_seed`'s generator). Evaluation mode (dropout off, batch norm on its
        running statistics) whatever ``model.training`` says, which is left as it is. For class labels, probabilities, float64 or a loss, use
        ``Trainer(model, loss=..., dtype=...).predict`` / ``predict_proba`` / ``evaluate``,
        which need no fit either. ``model(X)`` is the same call.

        Args:
            X: ``(N, in_features)`` array (``(N, C, H, W)`` for images), a tuple of arrays
                ``(X_num, X_cat)`` for a model with several inputs (``forward(self, x_num,
                x_cat)``), or a :class:`~nnjit.data.graph.Graph` (or
                :class:`~nnjit.data.full_batch.FullBatch`) for graph models: every node's row.

        Returns:
            ``(N, out_features)`` array in the trainer's dtype.

        Example:
            >>> model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
            >>> model.load_weights("model.nne")
            >>> logits = model.predict(X)
        """
        return self._inference_trainer()._outputs(X, f"{type(self).__name__}.predict")

    def _inference_trainer(self):
        """The trainer whose compiled forward ``predict`` and ``model(X)`` run (see predict)."""
        trainer = self.__dict__.get("_trainer")
        if trainer is None:  # it registers itself here once it lays the model out
            if not self.parameters():
                raise TypeError(f"{type(self).__name__} has no parameters: it runs on data only "
                                "inside a model; call the model that contains it")
            trainer = provider("inference_trainer", f"{type(self).__name__}.predict")(self)
        return trainer

    def summary(self, input_shape=None, *, graph=None, dtypes=None) -> None:
        """Print a table of the layers (Keras' ``model.summary()``): each module's dotted path,
        type, output shape (``None`` is the batch dimension; a module returning a tuple, as
        an LSTM's ``(output, (h_n, c_n))``, shows its shapes in brackets, nested as returned)
        and parameter count (its sub-modules' included, so a container's row repeats its
        layers'), then the totals.
        :meth:`summary_str` returns the same text.

        Args:
            input_shape: the input width (an int), a shape ``(None, *dims)`` (``(None, 1, 28,
                28)`` for images; the batch entry is ignored), or a tuple of shapes, one per
                input of ``forward`` (``((None, 4), (None, 2))``); by default the inputs the
                model was laid out for, else the first layer's ``in_features``
                (``in_channels`` for graph layers).
            graph: for graph models, the :class:`~nnjit.data.graph.Graph` to trace on (output
                shapes need it; without it, the table shows parameter counts only).
            dtypes: one dtype per input (as torchinfo's): an integer dtype traces an integer
                input (indices for an ``Embedding``); floats by default.
        """
        print(self.summary_str(input_shape, graph=graph, dtypes=dtypes))

    def summary_str(self, input_shape=None, *, graph=None, dtypes=None) -> str:
        """The table :meth:`summary` prints, as a string."""
        return summary_table(self, input_shape, graph, dtypes)

    # -- display -------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"  ({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n" + "\n".join(lines) + "\n)"


def _optional_or_group(a) -> bool:
    """An argument a traced ``forward`` may receive besides tensors: None (an optional input
    left out, ``rnn(x, None)``) or a tuple of tensors (an LSTM's ``(h_0, c_0)``)."""
    return a is None or (type(a) is tuple and bool(a)
                         and all(isinstance(t, Symbolic) for t in a))


def _check_name(module: Module, name, kind: str) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
    if not name:
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain ".", got "{name}"')
    taken = {"parameter": module._parameters, "module": module._modules,
             "buffer": module.__dict__.get("_buffers", {})}
    if name in module.__dict__ or any(name in names for k, names in taken.items() if k != kind):
        raise KeyError(f"attribute '{name}' already exists")
