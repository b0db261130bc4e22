"""scikit-learn estimators trained by nnjit's compiled loop (pip install 'nnjit[sklearn]').

``from nnjit.sklearn import MLPClassifier`` in place of ``from sklearn.neural_network import
MLPClassifier``: the same parameters, defaults, fitted attributes and (with ``dtype=np.float64``)
the same loss curves, from a fit that runs in one compiled call without the GIL.
:class:`NeuralNetClassifier` / :class:`NeuralNetRegressor` wrap any nnjit ``Module`` the same way
(skorch-style ``module__*`` parameters).
"""

try:
    import sklearn  # noqa: F401
except ImportError as e:  # (an optional extra: say which)
    raise ImportError("nnjit.sklearn needs scikit-learn: pip install 'nnjit[sklearn]'") from e

from nnjit.sklearn.mlp import MLPClassifier as MLPClassifier
from nnjit.sklearn.mlp import MLPRegressor as MLPRegressor
from nnjit.sklearn.neural_net import NeuralNetClassifier as NeuralNetClassifier
from nnjit.sklearn.neural_net import NeuralNetRegressor as NeuralNetRegressor
