"""Layers and modules. The seed engine's names (``DenseLayer``, ``ReLULayer``, ...) are aliases."""

from nnjit.nn import functional as functional
from nnjit.nn.activation import ELU as ELU
from nnjit.nn.activation import GELU as GELU
from nnjit.nn.activation import SELU as SELU
from nnjit.nn.activation import LeakyReLU as LeakyReLU
from nnjit.nn.activation import ReLU as ReLU
from nnjit.nn.activation import Sigmoid as Sigmoid
from nnjit.nn.activation import Softplus as Softplus
from nnjit.nn.activation import Tanh as Tanh
from nnjit.nn.conv import Conv2d as Conv2d
from nnjit.nn.dropout import Dropout as Dropout
from nnjit.nn.embedding import Embedding as Embedding
from nnjit.nn.flatten import Flatten as Flatten
from nnjit.nn.gnn import GATConv as GATConv
from nnjit.nn.gnn import GCNConv as GCNConv
from nnjit.nn.gnn import MessagePassing as MessagePassing
from nnjit.nn.gnn import SAGEConv as SAGEConv
from nnjit.nn.linear import Linear as Linear
from nnjit.nn.module import Module as Module
from nnjit.nn.normalization import BatchNorm1d as BatchNorm1d
from nnjit.nn.normalization import BatchNorm2d as BatchNorm2d
from nnjit.nn.normalization import LayerNorm as LayerNorm
from nnjit.nn.buffer import Buffer as Buffer
from nnjit.nn.op import Op as Op
from nnjit.nn.parameter import Parameter as Parameter
from nnjit.nn.pooling import AdaptiveAvgPool2d as AdaptiveAvgPool2d
from nnjit.nn.pooling import AvgPool2d as AvgPool2d
from nnjit.nn.pooling import MaxPool2d as MaxPool2d
from nnjit.nn.recurrent import GRU as GRU
from nnjit.nn.recurrent import LSTM as LSTM
from nnjit.nn.recurrent import RNN as RNN
from nnjit.nn.recurrent_cell import GRUCell as GRUCell
from nnjit.nn.recurrent_cell import LSTMCell as LSTMCell
from nnjit.nn.recurrent_cell import RNNCell as RNNCell
from nnjit.nn.sequential import Sequential as Sequential

# The inspiring C++ engine's names: thin aliases, not a second implementation.
DenseLayer = Linear
ReLULayer = ReLU
LeakyReLULayer = LeakyReLU
SigmoidLayer = Sigmoid
TanhLayer = Tanh
DropoutLayer = Dropout
