"""Graph layers: message passing over a graph's edges, compiled like every other op."""

from nnjit.nn.gnn.base import MessagePassing as MessagePassing
from nnjit.nn.gnn.gat import GATConv as GATConv
from nnjit.nn.gnn.gcn import GCNConv as GCNConv
from nnjit.nn.gnn.sage import SAGEConv as SAGEConv
