"""scikit-learn's own estimator checks (the installed version's) on nnjit.sklearn's MLPs."""

import numpy as np
import pytest

pytest.importorskip("sklearn")
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from nnjit.sklearn import MLPClassifier, MLPRegressor  # noqa: E402

# A small hidden layer: the checks fit a few hundred times. check_regressors_train wants R^2 >
# 0.5 on its data set, which scikit-learn's own MLPRegressor with (10,) reaches in 500 epochs,
# not 200. The lbfgs instances are the solver scikit-learn checks its own MLPClassifier's
# sample-weight equivalence with. Nothing is expected to fail.
_SMALL = dict(hidden_layer_sizes=(10,), random_state=0)


@parametrize_with_checks([MLPClassifier(**_SMALL),
                          MLPRegressor(**_SMALL, max_iter=500),
                          MLPClassifier(**_SMALL, dtype=np.float64),
                          MLPClassifier(**_SMALL, solver="lbfgs", dtype=np.float64),
                          MLPRegressor(**_SMALL, solver="lbfgs")])
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


def test_sample_weight_checks_are_generated():
    """``fit`` takes ``sample_weight``: the checks above include scikit-learn's sample-weight
    checks (it skips them for an estimator whose fit has no such parameter)."""
    from sklearn.utils.validation import has_fit_parameter

    for estimator in (MLPClassifier(), MLPRegressor()):
        assert has_fit_parameter(estimator, "sample_weight")
