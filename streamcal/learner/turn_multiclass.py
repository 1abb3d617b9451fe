"""The binary front door turns multiclass: when it does, and what it carries over.

``TurnsMulticlass`` is the part of ``VennAbersClassifier`` that decides: before anything
is learned, a label that is not binary or a model that predicts other classes turns it
multiclass from scratch; after, only an integer class may, keeping what was learned.
Either way the settings the multiclass side lacks are refused first, changing nothing.

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

from numbers import Integral

from river import compose

from streamcal.core.validate import check_label
from streamcal.learner.labels import is_binary
from streamcal.learner.multiclass import Classes, score_vector
from streamcal.learner.settings import check_multiclass

__all__ = ["TurnsMulticlass", "carry_over"]

# The settings the multiclass side takes over as they are (those it lacks are refused
# before the switch, ``_check_multiclass``).
_CARRIED = ("mode", "merge", "window", "refresh_every", "by", "max_categories",
            "label_horizon", "label_default")  # fmt: skip


class TurnsMulticlass:
    """The binary classifier's switch to a ``VennAbersMultiClassifier`` (its ``_multi``),
    which answers from then on. A mixin of ``VennAbersClassifier``: it reads the
    settings, ``_state`` and ``_horizon`` the classifier keeps."""

    def _learned_nothing(self) -> bool:
        st = self._state
        return getattr(st, "n_seen", getattr(st, "version", 0)) == 0

    def _take_multiclass(self, labels) -> None:
        """Turn multiclass for ``labels`` (taken by ``take_label``, not all binary): from
        scratch if nothing has been learned yet, else carrying the binary state over
        (``carry_over``), which only integer classes may do; else ``ValueError``,
        changing nothing."""
        other = next(v for v in labels if not is_binary(v))
        learned = not self._learned_nothing()
        if learned:
            odd = next((v for v in labels if not is_binary(v) and not _is_integer(v)), None)
            if odd is not None:
                raise ValueError(
                    f"label {odd!r} is not an integer, but this classifier has learned the "
                    "binary labels 0/1 (False/True): integer classes 0, 1, 2... turn it "
                    "multiclass, other classes after binary labels are refused as a likely "
                    "mistake; for classes of other types whose first labels may be 0 and 1, "
                    "use VennAbersMultiClassifier"
                )
        self._switch(f"label {other!r}", carry=learned)

    def _switch(self, why: str, carry: bool = False) -> None:
        """Answer through a multiclass classifier from now on (``why``: what showed it);
        ``carry``: continuing what the binary side learned."""
        from streamcal.learner.multiclassifier import VennAbersMultiClassifier

        self._check_multiclass(f"{why} makes this a multiclass stream, but")
        carried = {name: getattr(self, name) for name in _CARRIED}
        self._multi = VennAbersMultiClassifier(self.model, **carried)
        self._multi.warn_unlearned = self._warn_unlearned
        if carry:
            st = self._state
            if st.guard.unlearned:  # reports of the binary side: taken before it goes
                self._take_reports(st.guard)
            self._multi._unlearned = self._unlearned
            carry_over(st, self._multi)
        self._multi._horizon, self._horizon = self._horizon, None  # its waiting labels too

    def _check_multiclass(self, head: str) -> None:
        """ValueError (message starting with ``head``) for a setting or a model the
        multiclass side does not have."""
        if self.protect not in (False, None):
            raise ValueError(
                f"{head} protect= is for binary labels (multiclass protection is not built "
                "yet): drop protect=, or give the labels as False/True"
            )
        try:
            check_multiclass(self.mode, self.fallback)
        except ValueError as exc:
            raise ValueError(f"{head} {exc}") from None
        if not getattr(self.model, "_multiclass", False):
            model = self.model
            if isinstance(model, compose.Pipeline):  # the last step decides
                model = list(model.steps.values())[-1]
            raise ValueError(
                f"{head} the model {type(model).__name__} is binary only: wrap a "
                "multiclass model (GaussianNB, a Hoeffding tree...), or give the labels as "
                "False/True"
            )

    def _multiclass_model(self, x: dict) -> bool:
        """Whether, before any label, the wrapped model already predicts other classes than
        False/True for ``x``: then the classifier turns multiclass (True)."""
        if self._multi is not None or not self._learned_nothing():
            return False
        proba = self.model.predict_proba_one(dict(x))
        others = [c for c in proba if not _is_binary(c)]
        if not others:
            return False
        self._switch(f"the model's classes {sorted(proba, key=repr)!r}")
        return True

    @classmethod
    def _from_multiclass_state(cls, state: dict, by):
        """The classifier of a ``to_state`` taken once multiclass (``"task":
        "multiclass"``): the front door around the restored multiclass side."""
        from streamcal.learner.multiclassifier import VennAbersMultiClassifier

        multi = VennAbersMultiClassifier.from_state(state, by=by)
        clf = cls(
            multi.model,
            **cls._settings_from_state(state, by),
            max_categories=state["max_categories"],
            **cls._horizon_settings(state),
        )
        clf._horizon = None  # the multiclass side's answers (and waits)
        clf._multi = multi
        return clf


def _is_binary(label) -> bool:
    """Whether ``label`` is a binary label (``check_label`` takes it)."""
    try:
        check_label(label)
    except ValueError:
        return False
    return True


def _is_integer(label) -> bool:
    """Whether a taken label is an integer class (not a bool)."""
    return isinstance(label, Integral) and not isinstance(label, bool)


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
