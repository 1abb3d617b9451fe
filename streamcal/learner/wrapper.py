"""What the binary and multiclass Venn-Abers classifiers share, written once.

``VennAbersClassifier`` and ``VennAbersMultiClassifier`` are siblings (their outputs,
states and speeds differ), but they wrap a river model the same way: the same model
check, the same ``category=`` keyword, and the same settings at the head of their plain
data states (``to_state``/``from_state``). ``VennAbersWrapper`` holds that part; each
class keeps its own ``__init__`` parameters, which river's ``clone`` and
``check_estimator`` read back as attributes.

A callable ``by`` is not plain data: the state says there was one, and ``from_state``
needs it again.

>>> from river import linear_model
>>> from streamcal.learner import VennAbersClassifier
>>> clf = VennAbersClassifier(linear_model.LogisticRegression(), by=len)
>>> state = clf._settings_state()
>>> state["by"], state["mondrian"]
(None, True)
>>> VennAbersWrapper._settings_from_state(state, by=None)
Traceback (most recent call last):
...
ValueError: this classifier was saved with a callable by: pass it as by=
>>> VennAbersWrapper._settings_from_state(state, by=len)["by"]
<built-in function len>
"""

from __future__ import annotations

import pickle
import warnings
from collections import deque

from river import base

from streamcal.learner.guard import UnlearnedWarning
from streamcal.learner.horizon import DelayWatch, Horizon
from streamcal.learner.label_delays import OutcomeDependentDelayWarning
from streamcal.learner.settings import ClassifierSettings

__all__ = ["VennAbersWrapper"]

KEEP_UNLEARNED = 1000  # reports kept in ``unlearned`` (the newest)


class VennAbersWrapper(base.Wrapper, base.MiniBatchClassifier):
    """The part of a Venn-Abers classifier that does not depend on the number of classes.

    A subclass sets ``model``, ``mode``, ``merge``, ``window``, ``refresh_every`` and
    ``by`` in its ``__init__`` (after ``_check_model``) and ``_state``, its mode object.
    """

    # Whether an object the model did not learn is also given as an ``UnlearnedWarning``
    # (the stream processor turns the reports into dead letters instead).
    warn_unlearned = True
    _unlearned: deque | None = None

    @property
    def unlearned(self) -> deque:
        """The objects the wrapped model did not learn because learning them left its
        output non-finite (or raised), newest last: ``streamcal.learner.guard.Unlearned``
        reports (object, label, reason, the feature to blame and its value). Each is also
        given as an ``UnlearnedWarning``. The newest 1000 are kept; clear it once read."""
        if self._unlearned is None:
            self._unlearned = deque(maxlen=KEEP_UNLEARNED)
        return self._unlearned

    def _take_reports(self, guard) -> bool:
        """Move ``guard``'s new reports to ``unlearned`` (warning each); True if the label
        just given was refused as a whole (not taken)."""
        refused = False
        kept = self.unlearned
        for report in guard.unlearned:
            refused = refused or report.refused
            kept.append(report)
            if self.warn_unlearned:
                warnings.warn(str(report), UnlearnedWarning, stacklevel=3)
        guard.unlearned.clear()
        return refused

    def _settle(self) -> None:
        """Before the model is saved: check the steps learned since the guard's last
        pickle (modes "sva" and "va"), so that a model broken silently is never saved."""
        guard = self._state.guard
        guard.settle()
        if guard.unlearned:
            self._take_reports(guard)

    def _keep_settings(self, model, **given) -> ClassifierSettings:
        """``given`` checked as ``ClassifierSettings`` (which it returns), then kept with
        ``model`` as attributes of the same names: river's ``clone`` and
        ``check_estimator`` read a classifier's ``__init__`` parameters back from them."""
        settings = ClassifierSettings(**given)
        self.model = model
        for name, value in given.items():
            setattr(self, name, value)
        return settings

    @staticmethod
    def _check_model(model, kind: str) -> None:
        """TypeError unless ``model`` is a river single-label classifier (``kind`` names
        what is expected in the message)."""
        if not isinstance(model, base.Classifier) or isinstance(model, base.MultiLabelClassifier):
            raise TypeError(f"model must be a {kind}, got {model!r}")

    @property
    def _wrapped_model(self):
        return self.model

    def _unit_test_skips(self) -> set:
        # learn_many lets a model with river's learn_many learn in batches, which is not
        # learn_one to the last bit (a linear model takes one step per batch; naive Bayes
        # sums differently), and the calibrated p, a step function of the scores, then
        # moves by whole steps. Row-by-row models are checked (tests/learner too).
        from streamcal.learner.minibatch import learns_in_batches

        return {"check_learn_many_matches_learn_one"} if learns_in_batches(self.model) else set()

    @property
    def calibration_size(self) -> int:
        """Number of labelled objects in the calibration set right now (all categories')."""
        return self._answering()._state.calibration_size

    # ------------------------------------------------------------------ label horizon
    # streamcal.learner.horizon
    _delay_watch: DelayWatch | None = None
    # Without a horizon: whether label delays are watched, to warn once if they look
    # outcome-dependent (OutcomeDependentDelayWarning). A caller that watches them itself
    # (the stream processor, in record time) turns it off.
    watch_delays = True

    @property
    def late_labels(self) -> int:
        """With ``label_horizon``: labels that came when no prediction of their object waited
        (it had matured, or was never made): counted, not learned. 0 without."""
        hz = self._answering()._horizon
        return 0 if hz is None else hz.late

    @property
    def waiting(self) -> int:
        """With ``label_horizon``: predictions waiting to mature (at most the horizon)."""
        hz = self._answering()._horizon
        return 0 if hz is None else len(hz)

    def _answering(self) -> VennAbersWrapper:
        """The classifier that answers: the multiclass side once the binary front door
        turned multiclass (it took the horizon along), else this one."""
        multi = getattr(self, "_multi", None)
        return self if multi is None else multi

    def _horizon_state(self) -> dict:
        """The horizon's part of ``to_state``: its settings and waiting predictions (none
        without a horizon: such a state is what it was before horizons)."""
        hz = self._horizon
        if self.label_horizon is None:
            return {}
        return {
            "label_horizon": self.label_horizon,
            "label_default": self.label_default,
            "horizon": None if hz is None else hz.to_state(),
        }

    @staticmethod
    def _horizon_settings(state: dict) -> dict:
        """The ``__init__`` keywords of the horizon (none in a state without one)."""
        return {"label_horizon": state.get("label_horizon"),
                "label_default": state.get("label_default")}  # fmt: skip

    def _restore_horizon(self, state: dict) -> None:
        """Put back the waiting predictions ``_horizon_state`` saved."""
        if state.get("horizon") is not None:
            self._horizon = Horizon.from_state(state["horizon"])

    def _mature(self) -> None:
        """Learn the predictions that matured, in prediction order (before a prediction)."""
        hz = self._horizon
        hz.releasing = True
        try:
            while (item := hz.next_due()) is not None:
                x, y, kwargs = item
                self.learn_one(x, y, **kwargs)
        finally:
            hz.releasing = False

    def _predicted(self, x: dict, kwargs, p: float | None = None) -> None:
        """A prediction for ``x`` was made (``p``: its base p, for the protection): it waits
        for its label (with a horizon), or its delay is watched."""
        hz = self._horizon
        if hz is not None:
            hz.wait(x, kwargs, p)
        elif self.watch_delays:
            watch = self._delay_watch
            if watch is None:
                watch = self._delay_watch = DelayWatch()
            if not watch.done:
                watch.predicted(x, kwargs)

    def _waits(self, x: dict, y, kwargs) -> bool:
        """With a horizon, outside its release: ``y`` joins its waiting prediction (or is
        counted late) and is not learned now (True). Without, its delay is watched."""
        hz = self._horizon
        if hz is None:
            watch = self._delay_watch
            if watch is not None and not watch.done and self.watch_delays:
                text = watch.labelled(x, y, kwargs)
                if text is not None:
                    warnings.warn(text, OutcomeDependentDelayWarning, stacklevel=3)
            return False
        if hz.releasing:
            return False
        hz.label(x, y, kwargs)
        return True

    def _category(self, kwargs) -> tuple:
        """``(category,)`` if the caller gave ``category=``, else ``()``."""
        if "category" not in kwargs:
            return ()
        if self.by is None:
            raise ValueError("category= is for a Mondrian classifier (by=...)")
        return (kwargs["category"],)

    # ------------------------------------------------------------------ state
    def _settings_state(self) -> dict:
        """The settings both states begin with. A callable ``by`` is not plain data: it
        is saved as None, with ``mondrian`` saying there was one."""
        return {
            "mode": self.mode,
            "merge": self.merge,
            "window": self.window,
            "refresh_every": self.refresh_every,
            "by": None if callable(self.by) else self.by,
            "mondrian": self.by is not None,
        }

    def _model_state(self) -> bytes:
        """The river model's own pickle."""
        return pickle.dumps(self.model, protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def _model_from_state(state: dict):
        """The river model ``_model_state`` pickled (unpickling: trusted input only)."""
        return pickle.loads(state["model"])

    @staticmethod
    def _settings_from_state(state: dict, by) -> dict:
        """The ``__init__`` keywords of ``_settings_state``'s settings, ``by`` being the
        one the caller of ``from_state`` passed again (for a callable one)."""
        if state["mondrian"]:
            by = state["by"] if by is None else by
            if by is None:
                raise ValueError("this classifier was saved with a callable by: pass it as by=")
        return {
            "mode": state["mode"],
            "merge": state["merge"],
            "window": state["window"],
            "refresh_every": state["refresh_every"],
            "by": by if state["mondrian"] else None,
        }
