"""Learner: river-compatible Venn-Abers classifiers built on the core."""

from streamcal.learner.classifier import MODES, VennAbersClassifier
from streamcal.learner.interval import VennAbersInterval

__all__ = ["MODES", "VennAbersClassifier", "VennAbersInterval"]
