"""streamcal's test suite: a regular package, so that ``from tests._kafka_helpers import``
resolves here even where an installed distribution ships a top-level ``tests`` package
(a namespace package loses to any regular one on ``sys.path``; see tests/README.md)."""
