"""Optimizers, sorted by increasing complexity, and a factory."""

from nnjit.optim.adadelta import Adadelta as Adadelta
from nnjit.optim.adagrad import Adagrad as Adagrad
from nnjit.optim.adam import Adam as Adam
from nnjit.optim.adamax import Adamax as Adamax
from nnjit.optim.adamw import AdamW as AdamW
from nnjit.optim.base import Optimizer as Optimizer
from nnjit.optim.lbfgs import LBFGS as LBFGS
from nnjit.optim.nadam import NAdam as NAdam
from nnjit.optim.radam import RAdam as RAdam
from nnjit.optim.rmsprop import RMSprop as RMSprop
from nnjit.optim.sgd import SGD as SGD

OPTIMIZERS = {"sgd": SGD, "adam": Adam, "adamw": AdamW, "rmsprop": RMSprop, "adagrad": Adagrad,
              "adadelta": Adadelta, "adamax": Adamax, "nadam": NAdam, "radam": RAdam, "lbfgs": LBFGS}


def get_optimizer(identifier, **kwargs) -> Optimizer:
    """An optimizer from an instance, a class or a name (``"adam"``, ``"sgd"``, ...)."""
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, type) and issubclass(identifier, Optimizer):
        return identifier(**kwargs)
    if isinstance(identifier, str) and identifier.lower() in OPTIMIZERS:
        return OPTIMIZERS[identifier.lower()](**kwargs)
    raise ValueError(
        f"Could not interpret optimizer identifier: {identifier!r}; valid names: "
        f"{', '.join(OPTIMIZERS)}"
    )
