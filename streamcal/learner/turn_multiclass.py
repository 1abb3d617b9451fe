"""A binary classifier that has learned turns multiclass: its state carried over.

``VennAbersClassifier`` starts binary. A stream of integer classes 0..K-1 often shows 0
and 1 first: at the first integer label outside {0, 1} (2, say), with a model that does
multiclass and the default mode, the classifier turns multiclass **keeping what it
learned**, not replaying it:

* the classes 0 and 1 are the binary labels (``False`` is 0, ``True`` is 1); the new one
  comes third, then the others in order of first appearance;
* the wrapped model stays as it is: it has learned the objects older than the calibration
  set, with their labels (0/1 as ``False``/``True``, which river's classifiers count as the
  same classes);
* the calibration set keeps its objects, each rescored by the same model as a vector of
  class probabilities: what the multiclass stores would hold had the class been known
  from the start (a class the model does not know yet has score 0, as in
  ``streamcal.learner.multiclass``);
* the refresh schedule stays the binary one (every ``window`` labels by default, not the
  multiclass default ``2 * window``): the schedule is fixed by label counts before any
  label is seen, while one changed at the switch would make which objects the model
  learns depend on a label, which the pre-trained predictor's validity forbids.

So from the switch on, the classifier is exactly the ``VennAbersMultiClassifier`` with
``refresh_every`` the binary period that had been given the same stream from the start
(its classes in the order 0, 1, ...); validity is kept. Replaying instead is not
possible: the objects the model learned are gone (the pre-trained mode keeps only the
calibration set), and replaying only those would change what the model learned.

What cannot be carried is refused (``ValueError``) before anything changes: a label that
is not an integer after binary ones (a string ``"2"`` after 0 and 1 is more likely a
mistake than a class), and the settings the multiclass side lacks (see
``VennAbersClassifier``).
"""

from __future__ import annotations

from streamcal.learner.multiclass import Classes, score_vector

__all__ = ["carry_over"]


def carry_over(binary, multi) -> None:
    """Make the ``VennAbersMultiClassifier`` ``multi`` (new, same model and settings)
    continue the binary mode object ``binary`` (pre-trained, with or without ``by``) with
    its refresh period; ``multi``'s classes become 0 and 1.

    >>> from river import naive_bayes
    >>> from streamcal import VennAbersClassifier
    >>> clf = VennAbersClassifier(naive_bayes.GaussianNB(), window=4)
    >>> for i in range(12):
    ...     clf.learn_one({"a": float(i % 3)}, i % 3 % 2)
    >>> binary = clf.calibration_size
    >>> clf.learn_one({"a": 2.0}, 2)
    >>> clf.task, clf.classes, clf.calibration_size == binary + 1
    ('multiclass', [0, 1, 2], True)
    """
    multi._classes = classes = Classes([0, 1])
    model = multi.model
    state = binary.to_state()
    if multi.by is None:
        state = _vectors(state, model, classes)
        period = state["refresh_every"]
    else:
        state["categories"] = [[c, _vectors(s, model, classes)] for c, s in state["categories"]]
        period = binary.refresh_every
    multi._state = multi._new_state(period, state)


def _vectors(state: dict, model, classes: Classes) -> dict:
    """A binary pre-trained state with every calibration score a class-probability vector
    of ``model`` as it is (the multiclass state rebuilds its stores from them)."""
    calibration = [[x, y, score_vector(model, x, classes)] for x, y, _ in state["calibration"]]
    return {**state, "calibration": calibration}
