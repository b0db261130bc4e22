"""Graph-NN inputs: what a graph model's ``forward(self, x, edges)`` receives while traced, the
int64 graph data compiled code reads, and the loader of sampled subgraph batches."""
