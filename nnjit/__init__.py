"""nnjit: neural-network training whose whole loop runs in Numba-compiled code.

``import nnjit as nn`` gives the PyTorch-style API and the inspiring engine's names.
"""

from nnjit._version import __version__ as __version__

from nnjit import datasets as datasets
from nnjit import export as export  # (registers Module.save_onnx and the safetensors methods)
from nnjit.data.full_batch import FullBatch as FullBatch
from nnjit.distributed import MPI as MPI  # (imports mpi4py only when constructed)
from nnjit.data.graph import Graph as Graph
from nnjit.data.images import ImageDataset as ImageDataset
from nnjit.data.loader import DataLoader as DataLoader
from nnjit.data.neighbor_loader import NeighborLoader as NeighborLoader
from nnjit.engine.status import BadInputError as BadInputError
from nnjit.engine.status import TrainingDivergedError as TrainingDivergedError
from nnjit.engine.status import UnknownOpcodeError as UnknownOpcodeError
from nnjit.train.exclusive import TrainerBusyError as TrainerBusyError
from nnjit.tape.tape import Tape as Tape
from nnjit.tape.tape import Tensor as Tensor
from nnjit.losses import BCEWithLogitsLoss as BCEWithLogitsLoss
from nnjit.losses import CrossEntropyLoss as CrossEntropyLoss
from nnjit.losses import MSELoss as MSELoss
from nnjit.losses import SoftmaxCrossEntropyLoss as SoftmaxCrossEntropyLoss
from nnjit.losses import get_loss as get_loss
from nnjit.nn import (
    ELU as ELU,
    GELU as GELU,
    SELU as SELU,
    AdaptiveAvgPool2d as AdaptiveAvgPool2d,
    AvgPool2d as AvgPool2d,
    BatchNorm1d as BatchNorm1d,
    BatchNorm2d as BatchNorm2d,
    Conv2d as Conv2d,
    DenseLayer as DenseLayer,
    Dropout as Dropout,
    DropoutLayer as DropoutLayer,
    Embedding as Embedding,
    Flatten as Flatten,
    GATConv as GATConv,
    GCNConv as GCNConv,
    GRU as GRU,
    GRUCell as GRUCell,
    LSTM as LSTM,
    LSTMCell as LSTMCell,
    LeakyReLU as LeakyReLU,
    LayerNorm as LayerNorm,
    LeakyReLULayer as LeakyReLULayer,
    Linear as Linear,
    MaxPool2d as MaxPool2d,
    Module as Module,
    Op as Op,
    Parameter as Parameter,
    ReLU as ReLU,
    ReLULayer as ReLULayer,
    RNN as RNN,
    RNNCell as RNNCell,
    SAGEConv as SAGEConv,
    Sequential as Sequential,
    Sigmoid as Sigmoid,
    SigmoidLayer as SigmoidLayer,
    Softplus as Softplus,
    Tanh as Tanh,
    TanhLayer as TanhLayer,
    functional as functional,
)
from nnjit.optim import SGD as SGD
from nnjit.optim import Adadelta as Adadelta
from nnjit.optim import Adagrad as Adagrad
from nnjit.optim import Adam as Adam
from nnjit.optim import Adamax as Adamax
from nnjit.optim import AdamW as AdamW
from nnjit.optim import LBFGS as LBFGS
from nnjit.optim import NAdam as NAdam
from nnjit.optim import RAdam as RAdam
from nnjit.optim import RMSprop as RMSprop
from nnjit.optim import get_optimizer as get_optimizer
from nnjit.random import seeded as seeded
from nnjit.random import set_seed as set_seed
from nnjit.regularizers import L2Regularizer as L2Regularizer
from nnjit.regularizers import SklearnL2Regularizer as SklearnL2Regularizer
from nnjit.io.nne import NNEFormatError as NNEFormatError
from nnjit.io.nne import StateMismatchError as StateMismatchError
from nnjit.train.trainer import JITCompiler as JITCompiler
from nnjit.train.trainer import Trainer as Trainer

__all__ = [
    "AdaptiveAvgPool2d",
    "AvgPool2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "BCEWithLogitsLoss",
    "BadInputError",
    "Conv2d",
    "CrossEntropyLoss",
    "DataLoader",
    "DenseLayer",
    "Dropout",
    "DropoutLayer",
    "ELU",
    "Embedding",
    "Flatten",
    "FullBatch",
    "GATConv",
    "GCNConv",
    "GELU",
    "GRU",
    "GRUCell",
    "Graph",
    "ImageDataset",
    "SAGEConv",
    "JITCompiler",
    "L2Regularizer",
    "LayerNorm",
    "LSTM",
    "LSTMCell",
    "LeakyReLU",
    "LeakyReLULayer",
    "Linear",
    "MPI",
    "MaxPool2d",
    "MSELoss",
    "Module",
    "NeighborLoader",
    "NNEFormatError",
    "Op",
    "Parameter",
    "ReLU",
    "ReLULayer",
    "RMSprop",
    "RNN",
    "RNNCell",
    "SELU",
    "SGD",
    "Sequential",
    "Sigmoid",
    "SigmoidLayer",
    "SklearnL2Regularizer",
    "SoftmaxCrossEntropyLoss",
    "Softplus",
    "StateMismatchError",
    "Tanh",
    "TanhLayer",
    "Tape",
    "Tensor",
    "Trainer",
    "TrainerBusyError",
    "TrainingDivergedError",
    "UnknownOpcodeError",
    "Adadelta",
    "Adagrad",
    "Adam",
    "Adamax",
    "AdamW",
    "LBFGS",
    "NAdam",
    "RAdam",
    "datasets",
    "functional",
    "get_loss",
    "get_optimizer",
    "seeded",
    "set_seed",
    "__version__",
]
