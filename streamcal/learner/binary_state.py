"""The binary classifier as plain data, and the mode object its settings make.

``to_state`` gives ``VennAbersClassifier`` as settings, the river model's own pickle and
its mode object's state (numbers, arrays, feature dicts); ``from_state`` rebuilds it.
``new_mode_state`` makes the mode object of a set of settings (``"pretrained"``,
``"sva"``, ``"va"``, each Mondrian with ``by``), empty or from its state: the
constructor's and ``from_state``'s, written once.
"""

from __future__ import annotations

from streamcal.learner.alarm import snapshot_period
from streamcal.learner.mondrian import MondrianVennAbers
from streamcal.learner.pretrained import PretrainedVennAbers
from streamcal.learner.protection import Protection
from streamcal.learner.settings import ClassifierSettings
from streamcal.learner.sva import SimplifiedVennAbers
from streamcal.learner.va import VennAbers

__all__ = ["BinaryState", "new_mode_state"]

_MODE_CLASSES = {"pretrained": PretrainedVennAbers, "sva": SimplifiedVennAbers, "va": VennAbers}


class BinaryState:
    """``to_state`` and ``from_state`` of ``VennAbersClassifier`` (a mixin: the settings
    and the state are the classifier's)."""

    def to_state(self) -> dict:
        """The classifier as plain data: settings, the river model's own pickle, and the
        mode's state (numbers, arrays, feature dicts). ``from_state`` rebuilds it.

        >>> from river import linear_model
        >>> from streamcal import VennAbersClassifier
        >>> clf = VennAbersClassifier(linear_model.LogisticRegression(), window=3)
        >>> for i in range(5):
        ...     clf.learn_one({"a": float(i)}, i % 2)
        >>> copy = VennAbersClassifier.from_state(clf.to_state())
        >>> copy.predict_interval_one({"a": 2.5}) == clf.predict_interval_one({"a": 2.5})
        True

        Once multiclass, the ``VennAbersMultiClassifier`` state under ``"task":
        "multiclass"`` (a binary state has no ``task``: it is what it always was).
        """
        if self._multi is not None:
            return {"task": "multiclass", **self._multi.to_state()}
        self._settle()
        return {
            **self._settings_state(),
            "min_category": self.min_category,
            "fallback": self.fallback,
            "max_categories": self.max_categories,
            "protect": self.protect,
            "protection": None if self._protection is None else self._protection.to_state(),
            **self._horizon_state(),
            "model": self._model_state(),
            "mode_state": self._state.to_state(),
        }

    @classmethod
    def from_state(cls, state: dict, *, by=None):
        """The classifier ``to_state`` described (unpickles the model: trusted input only).

        A callable ``by`` is not plain data: pass it again as ``by=``.

        >>> from river import linear_model
        >>> from streamcal import VennAbersClassifier
        >>> clf = VennAbersClassifier(linear_model.LogisticRegression(), window=3, by="g")
        >>> for i in range(9):
        ...     clf.learn_one({"a": float(i), "g": i % 2}, i % 3 == 0)
        >>> copy = VennAbersClassifier.from_state(clf.to_state())
        >>> x = {"a": 2.5, "g": 1}
        >>> copy.predict_interval_one(x) == clf.predict_interval_one(x)
        True
        """
        if state.get("task") == "multiclass":
            return cls._from_multiclass_state(state, by)
        settings = cls._settings_from_state(state, by)
        model = cls._model_from_state(state)
        clf = cls(
            model,
            **settings,
            min_category=state["min_category"],
            fallback=state["fallback"],
            max_categories=state["max_categories"],
            protect=state["protect"],
            **cls._horizon_settings(state),
        )
        clf._state = new_mode_state(model, clf.settings, state["mode_state"])
        if state.get("protection") is not None:
            bound = clf.max_categories if clf.by is not None else None
            clf._protection = Protection.from_state(
                state["protection"], max_categories=bound, lookup=clf._protection.lookup,
                mode=clf.mode, period=snapshot_period(clf.window),
            )
        clf._restore_horizon(state)
        return clf


def new_mode_state(model, settings: ClassifierSettings, state: dict | None = None):
    """The mode object of ``settings`` scoring with ``model``: empty, or the one ``state``
    (its ``to_state()``) describes.

    >>> from river import linear_model
    >>> settings = ClassifierSettings(window=50, by="g")
    >>> type(new_mode_state(linear_model.LogisticRegression(), settings)).__name__
    'MondrianVennAbers'
    """
    refresh = settings.refresh_period
    if settings.by is not None:
        mondrian = {
            "mode": settings.mode,
            "window": settings.window,
            "refresh_every": refresh,
            "by": settings.by,
            "min_category": settings.category_minimum,  # the defaults resolved
            "fallback": "pooled" if settings.pooled else None,
            "max_categories": settings.max_categories,
        }
        if state is None:
            return MondrianVennAbers(model, **mondrian)
        return MondrianVennAbers.from_state(state, model=model, **mondrian)
    if state is not None:
        return _MODE_CLASSES[settings.mode].from_state(state, model=model)
    if settings.mode == "pretrained":
        return PretrainedVennAbers(model, settings.window, refresh)
    if settings.mode == "sva":
        return SimplifiedVennAbers(model, settings.window, refresh)
    return VennAbers(model, settings.window)
