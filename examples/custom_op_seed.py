"""The inspiring engine's custom-op example: a Python ``MulOp`` inside a model that trains.

The op's forward/backward are NumPy code on views of the arena. A model containing a Python op
trains through the same compiled loop, which returns to Python at the op (once forward and once
backward per batch); the script prints how much slower that is than the all-compiled model
(the median epoch time of a 50-epoch fit, compilation excluded).
"""

import numpy as np

import nnjit as nn


class MulOp(nn.Op):
    """Elementwise product of two tensors of the same shape."""

    def __init__(self, tape, a, b):
        super().__init__()
        self.a, self.b = a, b
        self.out = tape.alloc_tensor(a.rows, a.cols, True)

    def forward(self):
        np.multiply(self.a.data, self.b.data, out=self.out.data)

    def backward(self):
        self.a.grad[:] += self.out.grad * self.b.data
        self.b.grad[:] += self.out.grad * self.a.data


class GatedMLP(nn.Module):
    """h = relu(fc1 x) * sigmoid(gate x); out = fc2 h (the product as a Python op or compiled)."""

    def __init__(self, python_op: bool):
        super().__init__()
        self.python_op = python_op
        self.fc1 = self.add_module(nn.DenseLayer(4, 16))
        self.gate = self.add_module(nn.DenseLayer(4, 16))
        self.relu = self.add_module(nn.ReLULayer())
        self.sigmoid = self.add_module(nn.SigmoidLayer())
        self.fc2 = self.add_module(nn.DenseLayer(16, 3))

    def forward(self, tape, x):
        h = self.relu(tape, self.fc1(tape, x))
        g = self.sigmoid(tape, self.gate(tape, x))
        h = MulOp(tape, h, g).out if self.python_op else h * g
        return self.fc2(tape, h)


def train(python_op: bool):
    nn.set_seed(0)
    X, y = nn.datasets.load_iris()
    X_train, X_test, y_train, y_test = nn.datasets.train_test_split(X, y, 0.2, seed=0)
    X_train, X_test = nn.datasets.standardize(X_train, X_test)
    model = GatedMLP(python_op)
    trainer = nn.JITCompiler(model, nn.Adam(learning_rate=0.01), nn.SoftmaxCrossEntropyLoss())
    loader = nn.DataLoader(X_train, y_train, batch_size=16)
    trainer.fit(loader, epochs=2, verbose=False)  # compile / warm up
    history = trainer.fit(loader, epochs=50, n_iter_no_change=None, verbose=False)
    accuracy = np.mean(trainer.predict(X_test) == y_test)
    # the median epoch: an epoch the OS interrupted for another process does not count
    return history["seconds"].median(), accuracy, model


if __name__ == "__main__":
    py_epoch, py_acc, _ = train(python_op=True)
    jit_epoch, jit_acc, _ = train(python_op=False)
    print(f"Python MulOp: {py_epoch * 1e3:.2f} ms/epoch, test accuracy {py_acc:.3f}")
    print(f"compiled mul: {jit_epoch * 1e3:.3f} ms/epoch, test accuracy {jit_acc:.3f}")
    print(f"the Python op makes an epoch {py_epoch / jit_epoch:.0f}x slower")
