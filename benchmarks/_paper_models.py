"""Scoring classifiers standing in for the paper's six Weka ones, plus two river online models.

Every model is a *scoring function*: ``fit(X, y)`` then ``score(X)`` (what VA, SVA and DIR
calibrate) and ``proba(X)`` (the raw probability reported as W). A model is a deterministic
function of its training sequence: the random seed is fixed per split, so the two refits
of the Venn-Abers predictor (Algorithm 1) differ only by the test object and its label.

| key  | paper (Weka)        | here                                                         |
|------|---------------------|--------------------------------------------------------------|
| J    | J48                 | DecisionTreeClassifier(min_samples_leaf=2, ccp_alpha=0.005)  |
| JB   | J48 Bagging         | BaggingClassifier(that tree, n_estimators=10)                |
| LR   | Logistic (ridge 1e-8)| StandardScaler + LogisticRegression(C=1e4)                  |
| NB   | NaiveBayes          | GaussianNB (one-hot nominal columns treated as Gaussian too) |
| NN   | MultilayerPerceptron| MinMaxScaler(-1, 1) + MLPClassifier((h,), sigmoid, Adam, 500) |
| SVM  | SMO + Platt         | MinMaxScaler + SVC(linear, C=1); score = decision_function;  |
|      |                     | W = sigmoid fitted to in-sample decision values (Weka's -M)  |
| rLR  | --                  | river StandardScaler, LogisticRegression; one pass           |
| rHT  | --                  | river HoeffdingTreeClassifier(grace_period=50), one pass     |

Scores are ``predict_proba(X)[:, 1]`` except for SVM, whose score is the
``decision_function``: Platt's sigmoid is increasing, so isotonic calibration of either
gives the same result (the paper: "the application of the sigmoid function in Platt's
method is redundant"), and skipping it saves sklearn's internal 5-fold fit on every refit.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.ensemble import BaggingClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler
from sklearn.svm import SVC
from sklearn.tree import DecisionTreeClassifier

PAPER_CLASSIFIERS = ("J", "JB", "LR", "NB", "NN", "SVM")
RIVER_CLASSIFIERS = ("rLR", "rHT")
CLASSIFIERS = PAPER_CLASSIFIERS + RIVER_CLASSIFIERS
LONG_NAMES = {
    "J": "J48 (J) ~ pruned decision tree",
    "JB": "J48 Bagging (JB) ~ bagged trees",
    "LR": "logistic regression (LR)",
    "NB": "naive Bayes (NB) ~ Gaussian NB",
    "NN": "neural network (NN) ~ MLP",
    "SVM": "SVM Platt (SVM) ~ SVC",
    "rLR": "river logistic regression, one pass (rLR)",
    "rHT": "river Hoeffding tree, one pass (rHT)",
}


def _tree(seed: int) -> DecisionTreeClassifier:
    # J48 prunes (confidence 0.25, >= 2 objects per leaf); cost-complexity pruning is the
    # closest sklearn knob. An unpruned tree scores every training object 0 or 1.
    return DecisionTreeClassifier(min_samples_leaf=2, ccp_alpha=0.005, random_state=seed)


class SklearnScorer:
    """A scikit-learn classifier as a scoring function (positive class = label 1)."""

    def __init__(self, key: str, seed: int, *, platt: bool = False):
        self.key = key
        self.seed = seed
        self.platt = platt  # SVM only: also fit Platt's sigmoid, for W
        self.model = None

    def _make(self):
        k, seed = self.key, self.seed
        if k == "J":
            return _tree(seed)
        if k == "JB":
            return BaggingClassifier(_tree(seed), n_estimators=10, random_state=seed)
        if k == "LR":
            # Weka's Logistic is ridge 1e-8, i.e. nearly unregularised: it can output
            # probabilities that round to 0 or 1 (the paper's infinite W entries).
            return make_pipeline(StandardScaler(), LogisticRegression(C=1e4, max_iter=2000))
        if k == "NB":
            return GaussianNB()
        if k == "NN":
            # Weka's MultilayerPerceptron: one sigmoid hidden layer, attributes scaled to
            # [-1, 1], 500 epochs of gradient descent without weight decay (Weka uses plain
            # SGD with momentum; Adam reaches a similar fit in far less time here)
            return make_pipeline(
                MinMaxScaler((-1, 1)),
                MLPClassifier(
                    hidden_layer_sizes=(self._hidden,),
                    activation="logistic",
                    learning_rate_init=0.01,
                    max_iter=500,
                    random_state=seed,
                ),
            )
        if k == "SVM":
            # Weka's SMO defaults: linear (degree-1 polynomial) kernel, C = 1, attributes
            # normalised to [0, 1]
            return make_pipeline(MinMaxScaler(), SVC(kernel="linear", C=1.0, random_state=seed))
        raise ValueError(f"unknown classifier {k!r}")

    def fit(self, X: np.ndarray, y: np.ndarray) -> SklearnScorer:
        # Weka's default hidden layer: (attributes + classes) / 2 units
        self._hidden = max(2, (X.shape[1] + 2) // 2)
        self.model = self._make()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            self.model.fit(X, y)
            if self.platt and self.key == "SVM":
                # Weka's SMO -M: Platt's sigmoid is a logistic regression (ridge 1e-8) fitted
                # to the SVM's outputs on its own training data (no cross-validation)
                d = self.model.decision_function(X)[:, None]
                self.platt_model = LogisticRegression(C=1e8, max_iter=2000).fit(d, y)
        return self

    def _p1(self, X):
        proba = self.model.predict_proba(X)
        return proba[:, list(self.model.classes_).index(1)]

    def score(self, X: np.ndarray) -> np.ndarray:
        if self.key == "SVM":
            return np.asarray(self.model.decision_function(X), dtype=float)
        return self._p1(X)

    def proba(self, X: np.ndarray) -> np.ndarray:
        if self.key == "SVM":
            if not self.platt:
                raise ValueError("SVM probabilities need make_scorer('SVM', seed, platt=True)")
            proba = self.platt_model.predict_proba(self.model.decision_function(X)[:, None])
            return proba[:, list(self.platt_model.classes_).index(1)]
        return self._p1(X)


class RiverScorer:
    """A river online classifier trained in one pass over the training sequence, in order.

    For VA the test object is appended at the end of that sequence: a stream learner sees
    it last. One-pass learners depend on the order, so unlike the batch models they are
    not symmetric functions of the training multiset (VA's validity proof assumes that).
    """

    def __init__(self, key: str, seed: int, **_):
        self.key = key
        self.seed = seed

    def _make(self):
        from river import linear_model, preprocessing, tree

        if self.key == "rLR":
            return preprocessing.StandardScaler() | linear_model.LogisticRegression()
        if self.key == "rHT":
            return tree.HoeffdingTreeClassifier(grace_period=50)
        raise ValueError(f"unknown classifier {self.key!r}")

    @staticmethod
    def _rows(X: np.ndarray) -> list[dict]:
        return [dict(enumerate(row)) for row in X.tolist()]

    def fit(self, X: np.ndarray, y: np.ndarray) -> RiverScorer:
        self.model = self._make()
        for x, label in zip(self._rows(X), y.tolist(), strict=True):
            self.model.learn_one(x, bool(label))
        return self

    def score(self, X: np.ndarray) -> np.ndarray:
        out = []
        for x in self._rows(X):
            out.append(self.model.predict_proba_one(x).get(True, 0.0))
        return np.array(out, dtype=float)

    proba = score


def make_scorer(key: str, seed: int, *, platt: bool = False):
    """A fresh, unfitted scorer for classifier ``key``; ``platt`` asks SVM for W probabilities."""
    if key in PAPER_CLASSIFIERS:
        return SklearnScorer(key, seed, platt=platt)
    if key in RIVER_CLASSIFIERS:
        return RiverScorer(key, seed)
    raise ValueError(f"unknown classifier {key!r}; choose from {', '.join(CLASSIFIERS)}")
