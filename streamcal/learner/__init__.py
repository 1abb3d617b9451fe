"""Learner: river-compatible Venn-Abers classifiers built on the core."""
