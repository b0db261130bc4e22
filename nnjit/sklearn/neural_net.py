"""``NeuralNetClassifier`` / ``NeuralNetRegressor``: any nnjit :class:`~nnjit.nn.Module` as a
scikit-learn estimator, the way skorch wraps PyTorch modules.

The module is given as a factory (a Module class or any callable returning a Module) and its
arguments as estimator parameters prefixed ``module__`` (``module__hidden=64``); the optimizer's
as ``optimizer__`` (``optimizer__momentum=0.9``). ``get_params`` / ``set_params`` list and set
them, so ``clone``, ``Pipeline`` and ``GridSearchCV(param_grid={"module__hidden": [...]})`` work;
each ``fit`` builds a fresh module and trains it with a :class:`~nnjit.Trainer` in compiled code
(the GIL released: joblib's threading backend runs fits side by side).

scikit-learn is an optional dependency (``pip install 'nnjit[sklearn]'``), imported when this
module is.
"""

from __future__ import annotations

import copy

import numpy as np

try:
    from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
    from sklearn.preprocessing import LabelEncoder
    from sklearn.utils.validation import check_is_fitted, check_random_state
except ImportError as e:  # pragma: no cover (the extra is installed in the test environment)
    raise ImportError("nnjit.sklearn needs scikit-learn: pip install 'nnjit[sklearn]'") from e

from nnjit.losses import CrossEntropyLoss, MSELoss, get_loss
from nnjit.nn.module import Module
from nnjit.optim import get_optimizer
from nnjit.random import seeded
from nnjit.train.trainer import Trainer

__all__ = ["NeuralNetClassifier", "NeuralNetRegressor"]

_PREFIXES = ("module__", "optimizer__")


class _NeuralNet(BaseEstimator):
    """What the classifier and the regressor share (see :class:`NeuralNetClassifier`)."""

    _default_loss = None  # set by the subclasses

    def __init__(self, module, *, optimizer="adam", lr=0.01, max_epochs=10, batch_size=128,
                 loss=None, dtype=np.float32, shuffle=True, random_state=None, verbose=False,
                 **kwargs):
        self.module = module
        self.optimizer = optimizer
        self.lr = lr
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.loss = loss
        self.dtype = dtype
        self.shuffle = shuffle
        self.random_state = random_state
        self.verbose = verbose
        for name, value in kwargs.items():
            if not name.startswith(_PREFIXES):
                raise TypeError(f"{type(self).__name__}: unexpected parameter {name!r} (the "
                                "module's arguments are module__<name>, the optimizer's "
                                "optimizer__<name>)")
            setattr(self, name, value)

    # -- parameters (skorch's rule: prefixed parameters live beside the signature's) -------------
    def _prefixed(self, prefix: str) -> dict:
        return {k[len(prefix):]: v for k, v in vars(self).items() if k.startswith(prefix)}

    def get_params(self, deep=True) -> dict:
        """The constructor's parameters and every ``module__*`` / ``optimizer__*`` one."""
        params = super().get_params(deep=deep)
        params.update({k: v for k, v in vars(self).items() if k.startswith(_PREFIXES)})
        return params

    def set_params(self, **params):
        """Set parameters; ``module__*`` and ``optimizer__*`` ones are set as given (the next
        ``fit`` builds the module and the optimizer with them)."""
        for name in [k for k in params if k.startswith(_PREFIXES)]:
            setattr(self, name, params.pop(name))
        if params:
            super().set_params(**params)
        return self

    # -- building ----------------------------------------------------------------------------
    def _seed(self) -> int | None:
        if self.random_state is None:
            return None
        if isinstance(self.random_state, (int, np.integer)):
            return int(self.random_state)
        return int(check_random_state(self.random_state).randint(2**31 - 1))

    def _build_module(self, seed) -> Module:
        kwargs = self._prefixed("module__")
        module = self.module
        if isinstance(module, Module):
            if kwargs:
                raise ValueError(f"{type(self).__name__}: module is an instance, so "
                                 f"module__{next(iter(kwargs))} cannot be applied; pass its "
                                 "class (module=MyModule) to build it with them")
            return copy.deepcopy(module)  # (each fit starts from the instance's weights)
        if not callable(module):
            raise TypeError(f"{type(self).__name__}: module must be an nnjit Module class, a "
                            f"callable returning a Module, or a Module, got "
                            f"{type(module).__name__}")
        if seed is None:
            built = module(**kwargs)
        else:
            with seeded(seed):  # (this thread's generator: fits in threads stay reproducible)
                built = module(**kwargs)
        if not isinstance(built, Module):
            raise TypeError(f"{type(self).__name__}: module() returned "
                            f"{type(built).__name__}, not an nnjit Module")
        return built

    def _trainer(self, model: Module, seed) -> Trainer:
        optimizer = get_optimizer(self.optimizer, lr=self.lr, **self._prefixed("optimizer__"))
        loss = self._default_loss() if self.loss is None else get_loss(
            copy.deepcopy(self.loss))
        return Trainer(model, optimizer, loss, dtype=self.dtype, seed=seed)

    def _validate_X(self, X, reset: bool):
        """``X`` checked as scikit-learn checks it (2-D, finite); records ``n_features_in_`` and
        ``feature_names_in_`` when fitting, compares with them when predicting."""
        try:
            from sklearn.utils.validation import validate_data
        except ImportError:  # scikit-learn < 1.6
            return self._validate_data(X, reset=reset, dtype=[np.float64, np.float32])
        return validate_data(self, X, reset=reset, dtype=[np.float64, np.float32])

    def _fit(self, X, targets):
        seed = self._seed()
        self.module_ = self._build_module(seed)
        self.trainer_ = self._trainer(self.module_, seed)
        self.history_ = self.trainer_.fit(X, targets, epochs=self.max_epochs,
                                          batch_size=self.batch_size, shuffle=self.shuffle,
                                          n_iter_no_change=None, verbose=self.verbose)
        return self

    def _predict_trainer(self) -> Trainer:
        check_is_fitted(self, "module_")
        trainer = self.__dict__.get("trainer_")
        if trainer is None:  # (unpickled: a trainer for the restored module)
            trainer = self.trainer_ = self._trainer(self.module_, 0)
        return trainer

    # -- pickling: the module's weights, not the compiled program --------------------------------
    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("trainer_", None)
        module = state.pop("module_", None)
        if module is not None:
            state["_module_weights"] = module.state_dict()
        return state

    def __setstate__(self, state):
        weights = state.pop("_module_weights", None)
        self.__dict__.update(state)
        if weights is not None:
            module = self._build_module(0)
            module.load_state_dict(weights)
            self.module_ = module


class NeuralNetClassifier(ClassifierMixin, _NeuralNet):
    """An nnjit Module as a scikit-learn classifier (skorch's ``NeuralNetClassifier``).

    Args:
        module: a Module class or a callable returning a Module (called with the ``module__*``
            parameters at every fit), or a Module (deep-copied at every fit). Its output must
            have one column per class (logits).
        optimizer: a name (``"adam"``, ``"sgd"``...) or an nnjit optimizer class; its other
            arguments as ``optimizer__<name>``.
        lr: learning rate.
        max_epochs: epochs per fit (no early stopping).
        batch_size: rows per minibatch.
        loss: a loss name, class or instance (default cross-entropy).
        dtype: ``np.float32`` (default) or ``np.float64``.
        shuffle: shuffle the rows every epoch.
        random_state: seed of the module's initial weights and of the shuffling and dropout (an
            int, a ``RandomState`` or None).
        verbose: the trainer's ``verbose``.
        **kwargs: ``module__<name>`` and ``optimizer__<name>`` parameters.

    Attributes (after fit): ``module_`` (the trained Module), ``trainer_``, ``history_`` (a
    DataFrame, one row per epoch), ``classes_`` (any labels, strings too), ``n_features_in_``
    (and ``feature_names_in_`` for a DataFrame).
    """

    _default_loss = CrossEntropyLoss

    def fit(self, X, y):
        """Train a freshly built module on ``X`` (2-D) and labels ``y``."""
        from sklearn.utils.multiclass import check_classification_targets

        X = self._validate_X(X, reset=True)
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y.ravel()
        if len(y) != len(X):
            raise ValueError(f"{type(self).__name__}.fit: X has {len(X)} rows, y has {len(y)}")
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        return self._fit(X, encoder.transform(y).astype(np.int64))

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities ``(N, n_classes)`` (float64), columns in ``classes_`` order."""
        trainer = self._predict_trainer()
        return trainer.predict_proba(self._validate_X(X, reset=False)).astype(np.float64)

    def predict(self, X) -> np.ndarray:
        """The most probable class label of each row."""
        trainer = self._predict_trainer()
        return self.classes_[trainer.predict(self._validate_X(X, reset=False))]


class NeuralNetRegressor(RegressorMixin, _NeuralNet):
    """An nnjit Module as a scikit-learn regressor (skorch's ``NeuralNetRegressor``); the
    parameters are :class:`NeuralNetClassifier`'s, with mean squared error as the default loss.
    ``y`` may be 1-D (then ``predict`` returns 1-D) or ``(N, n_targets)``."""

    _default_loss = MSELoss

    def fit(self, X, y):
        """Train a freshly built module on ``X`` (2-D) and targets ``y``."""
        X = self._validate_X(X, reset=True)
        y = np.asarray(y, dtype=np.float64)
        if len(y) != len(X):
            raise ValueError(f"{type(self).__name__}.fit: X has {len(X)} rows, y has {len(y)}")
        self._y_ndim = y.ndim
        return self._fit(X, y.reshape(len(y), -1))

    def predict(self, X) -> np.ndarray:
        """The module's outputs (float64), 1-D when ``y`` was."""
        trainer = self._predict_trainer()
        out = trainer.predict_outputs(self._validate_X(X, reset=False)).astype(np.float64)
        return out.ravel() if self._y_ndim == 1 and out.shape[1] == 1 else out
