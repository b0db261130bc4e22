from nnjit.sklearn.neural_net import NeuralNetClassifier, NeuralNetRegressor
