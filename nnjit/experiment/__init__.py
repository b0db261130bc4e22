"""Experiment toolkit: validated configs and enums that build what they name.

``RunConfig`` (with ``ModelConfig``/``NetConfig``, ``OptimizerConfig``, ``SchedulerConfig``,
``TrainConfig``) describes a run; its ``config_hash()`` is the run id. The enums (``Nets``,
``Losses``, ``Optims``, ``Schedulers``, ``Activations``, ``Devices``, ``Checkpoints``) map the
names used in configs to nnjit objects. ``sweep`` trains a grid of configurations as runs on a
thread pool or a Dask cluster (:mod:`nnjit.experiment.sweep`).
"""

from nnjit.experiment.config import ModelConfig as ModelConfig
from nnjit.experiment.config import NetConfig as NetConfig
from nnjit.experiment.config import OptimizerConfig as OptimizerConfig
from nnjit.experiment.config import RunConfig as RunConfig
from nnjit.experiment.config import SchedulerConfig as SchedulerConfig
from nnjit.experiment.config import TrainConfig as TrainConfig
from nnjit.experiment.enums import Activations as Activations
from nnjit.experiment.enums import Checkpoints as Checkpoints
from nnjit.experiment.enums import Devices as Devices
from nnjit.experiment.enums import Losses as Losses
from nnjit.experiment.enums import Nets as Nets
from nnjit.experiment.enums import Optims as Optims
from nnjit.experiment.enums import Schedulers as Schedulers

# the function: nnjit.experiment.sweep(...) as the docs call it (the module stays importable as
# `from nnjit.experiment.sweep import ...`)
from nnjit.experiment.sweep import sweep as sweep

__all__ = [
    "Activations", "Checkpoints", "Devices", "Losses", "ModelConfig", "NetConfig", "Nets",
    "OptimizerConfig", "Optims", "RunConfig", "SchedulerConfig", "Schedulers", "TrainConfig",
    "sweep",
]
