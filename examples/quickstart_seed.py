"""The inspiring C++ engine's quick-start, unchanged except for the import line.

Iris, a 4-16-3 MLP, Adam, one-hot float32 targets, 100 epochs with tol-based stopping, then a
save/load round trip of the weights.
"""

import numpy as np

import nnjit as nn

nn.set_seed(42)

# Data: Iris (bundled), standardised, one-hot float32 targets.
X, y = nn.datasets.load_iris()
X_train, X_test, y_train, y_test = nn.datasets.train_test_split(X, y, test_size=0.2, seed=42)
X_train, X_test = nn.datasets.standardize(X_train, X_test)
y_train_onehot = np.eye(3, dtype=np.float32)[y_train]


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = self.add_module(nn.DenseLayer(4, 16))
        self.relu = self.add_module(nn.ReLULayer())
        self.fc2 = self.add_module(nn.DenseLayer(16, 3))

    def forward(self, tape, x):
        x = self.fc1(tape, x)
        x = self.relu(tape, x)
        return self.fc2(tape, x)


model = MLP()
optimizer = nn.Adam(learning_rate=0.01)
loss_fn = nn.SoftmaxCrossEntropyLoss()
trainer = nn.JITCompiler(model, optimizer, loss_fn)

dataloader = nn.DataLoader(X_train, y_train_onehot, batch_size=16)
history = trainer.fit(dataloader, epochs=100, tol=1e-4)

model.save_weights("model.nne")
model.load_weights("model.nne")

logits = model.predict(X_test)
accuracy = np.mean(np.argmax(logits, axis=1) == y_test)
print(f"epochs run: {len(history)}, test accuracy: {accuracy:.3f}")
