"""Learning that cannot leave the model broken: a learning step that makes the model's
output non-finite (or raises an arithmetic error) is undone, and the objects that caused it
are found, left unlearned and reported.

One record can break an online model for good. river's ``StandardScaler`` squares a
feature of 1e160 (or 1e300) into an infinite variance; the output stays finite (the
feature is divided by an infinite deviation), but from the next learning step on every
weight of the logistic regression behind it is NaN, and nothing later repairs it. So
every learning step of the wrapped model is checked, and undone if it fails:

* **The check.** The model's output is finite on the objects at hand (the scores the
  mode computes anyway), and stays finite after one more learning step, taken on a copy
  with the object just learned (``lookahead``). The lookahead is what catches the scaler
  above at the step that broke it, not one step later on an innocent object.
* **Batches** (the default mode learns in batches at each refresh; mini-batches): the
  model is pickled before the batch. If the batch fails the check (the rescored
  calibration set, then the lookahead) or learning it raises, the pickle is restored,
  and the objects to blame are found by bisection over the batch in stream order (the
  shortest failing prefix ends with one); the others are learned again
  (``ModelGuard.learn_batch``, ``learn_checked``). Cost when nothing fails: two pickles
  and one lookahead per refresh, i.e. per ``refresh_every`` labels.
* **Every label** (modes "sva" and "va", which learn each label at once): the output on
  the learned object is checked after each step (one score, which "sva" computes anyway),
  the model is pickled every ``SNAPSHOT_PERIOD`` labels, once a lookahead has checked it,
  and the labels since are logged. A step whose output is not finite is undone by
  restoring the pickle and replaying the log, each logged label now fully checked, so
  that one that broke the model silently (the scaler above) is found and left out; then
  the failing label is tried again, and refused if it fails again
  (``ModelGuard.learn_step``). ``settle`` checks and pickles the model before it is saved
  (``to_state``), so a broken model is never saved. Cost: a copy of each label's
  features into the log, and two pickles per ``SNAPSHOT_PERIOD`` labels.

What is not learned is reported as an ``Unlearned`` record (the object, its label, why,
and its feature most likely to blame: the first that is not finite, else the largest in
magnitude). The classifiers give each as an ``UnlearnedWarning`` and keep them in their
``unlearned`` list, which the stream processor turns into dead letters.

A model that is already broken before a batch (e.g. saved so by an earlier streamcal)
cannot be repaired: its failure is raised as before.

**Programming errors are not poison.** A ``TypeError`` or ``AttributeError`` raised by the
model's own learning or scoring (a string feature left before a numeric model, river's
integer column names) says the pipeline does not fit the data, not that one object is
bad: every object would fail alike, and undoing each would leave a model that never
learns, behind thousands of warnings. It is raised at once, as bare river raises it (the
model back as it was before the step), its message naming what it can suspect
(``streamcal.core.validate.suspect_kind``): ``MODEL_ERRORS``, ``model_error``.

>>> from river import linear_model, preprocessing
>>> model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
>>> guard = ModelGuard(model)
>>> xs = [{"a": float(i % 5), "b": 1.0} for i in range(20)]
>>> xs[7] = {"a": 1e300, "b": 1.0}
>>> for x in xs:
...     _ = guard.learn_step(x, x["a"] > 2, learn_and_score)
>>> [(r.feature, r.value, r.labels_ago, r.taken) for r in guard.unlearned]
[('a', 1e+300, 1, True)]
>>> print(guard.unlearned[0].reason)
left the model broken: one more learning step made its output nan
>>> model.predict_proba_one({"a": 3.0, "b": 1.0})[True] > 0.5
True

Its own step left the output finite: the next label's failed, and the replay of the log
found the label to blame (one label ago; the calibration set had taken it).
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass

import numpy as np

from streamcal.core.validate import not_finite, short_repr, suspect, suspect_kind
from streamcal.learner.scoring import NonFiniteScore, score_sorted

__all__ = [
    "MODEL_ERRORS",
    "SNAPSHOT_PERIOD",
    "ModelGuard",
    "Unlearned",
    "UnlearnedWarning",
    "learn_checked",
    "learn_and_look",
    "learn_and_score",
    "lookahead",
    "model_error",
    "restore",
    "snapshot",
]

# Modes "sva" and "va": labels between two pickles of the model. A failing step replays at
# most this many labels, kept with their features (about 1.3 KB each with 20 features).
# Measured with "sva" (scaled logistic regression, 20 features): the pickle and its
# lookahead add 1.1 µs per label every 100 labels, 0.65 µs every 250, 0.36 every 1000.
SNAPSHOT_PERIOD = 256

# What the wrapped model raises when the pipeline does not fit the data: raised, not undone
MODEL_ERRORS = (TypeError, AttributeError)


def model_error(exc: Exception, xs) -> Exception:
    """A programming error ``exc`` of the wrapped model learning the objects ``xs``, of the
    same kind, its message naming what it can suspect in them (a value that is not a
    number, a feature name that is not a string: the first object that has one).

    >>> err = model_error(TypeError("unsupported operand"), [{"x1": 0.3, "country": "fr"}])
    >>> "'country' = 'fr' is not a number" in str(err), type(err).__name__
    (True, 'TypeError')
    """
    why = next((w for w in map(suspect_kind, xs) if w is not None), None)
    where = "" if why is None else f": {why}; drop or encode it before the model"
    kind = TypeError if isinstance(exc, TypeError) else AttributeError
    return kind(f"{exc} (raised by the wrapped model's learning{where})")


class _Broken(NonFiniteScore):
    """A learning step failed its lookahead; the message is the reason itself."""


class UnlearnedWarning(UserWarning):
    """The model did not learn an object: learning it left the model's output non-finite
    (or raised), so it was undone (``streamcal.learner.guard``). A category of its own, to
    filter: ``warnings.simplefilter("ignore", UnlearnedWarning)``; the classifier's
    ``unlearned`` keeps the reports."""


@dataclass(frozen=True)
class Unlearned:
    """An object the model did not learn, and why.

    ``x`` and ``y``: the object and its label (as the model would have learned it).
    ``reason``: what learning it did ("raised ...", "left the model's output non-finite
    ..."). ``feature`` and ``value``: its feature most likely to blame
    (``streamcal.core.validate.suspect``).
    ``labels_ago``: the labels the classifier was given after this one when it was found
    (0: the last one). ``taken``: whether the calibration set took the label, only the
    model not learning it (the default mode learns an object after it calibrated); False
    for a label refused as a whole (modes "sva" and "va", when its own step failed).
    """

    x: dict
    y: object
    reason: str
    feature: object
    value: object
    labels_ago: int
    taken: bool

    @property
    def refused(self) -> bool:
        """Whether this is the label just given, refused as a whole (nothing of it kept)."""
        return self.labels_ago == 0 and not self.taken

    @property
    def why(self) -> str:
        """What learning it did, and the feature to blame: "left the model's output
        non-finite (...); its feature 'a' = 1e+300"."""
        if self.feature is None:
            return self.reason
        return f"{self.reason}; its feature {short_repr(self.feature)} = {short_repr(self.value)}"

    def __str__(self) -> str:
        when = "the last label" if self.labels_ago == 0 else f"{self.labels_ago} labels ago"
        what = "the label is kept for calibration" if self.taken else "nothing of it was kept"
        return (
            f"the model did not learn an object (label {short_repr(self.y)}, {when}): "
            f"learning it {self.why}; undone ({what})"
        )


def snapshot(model) -> bytes:
    """The model's exact state as bytes (a pickle round trip copies a river model 2-3x
    faster than ``copy.deepcopy``)."""
    return pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL)


def restore(model, data: bytes) -> None:
    """Make ``model`` the model ``snapshot`` pickled into ``data``, in place: whoever holds
    it (the classifier, the mode, the categories) sees the change."""
    fresh = pickle.loads(data)
    state = vars(model)
    state.clear()
    state.update(vars(fresh))


def lookahead(model, x: dict, y, data: bytes | None = None) -> str | None:
    """None if a copy of ``model`` (or of the pickle ``data`` of it), after learning
    ``(x, y)`` once more, still gives ``x`` finite probabilities; else what happened,
    as the end of "learning it ..."."""
    copy = pickle.loads(snapshot(model) if data is None else data)
    try:
        copy.learn_one(x, y)
        proba = copy.predict_proba_one(x)
    except Exception as exc:  # noqa: BLE001 - any error of the broken copy is the finding
        return f"left the model broken: one more learning step then raised {exc!r}"
    for v in proba.values():
        if not_finite(v) is not None:
            return f"left the model broken: one more learning step made its output {v!r}"
    return None


def _attempt(learn, check, items) -> str | None:
    """Teach ``items`` and check the model: None, or what went wrong."""
    try:
        learn(items)
    except MODEL_ERRORS:
        raise
    except Exception as exc:  # noqa: BLE001 - any model error: undo and find the object
        return f"raised {exc!r}"
    try:
        return check(items)
    except NonFiniteScore as exc:
        return f"left the model's output non-finite ({exc})"
    except MODEL_ERRORS:
        raise
    except Exception as exc:  # noqa: BLE001 - the model learned, then could not score
        return f"left the model unable to score: {exc!r}"


def learn_checked(model, items: list, learn, check) -> list[tuple[object, str]]:
    """Teach ``model`` the ``items`` (``learn(items)``, in order) so that it passes
    ``check(items)`` (None, or why it fails; it may raise ``NonFiniteScore``): the
    ``(item, reason)`` of those left out, in order; the model has learned the others, in
    order. When everything passes (the common case) this costs one pickle of the model.

    On failure the model is restored and the first item to blame is found by bisection:
    the shortest prefix that fails ends with it (the empty prefix passes: the model was
    checked before). The prefix before it is learned, and the rest is tried in the same
    way. ``check`` may have side effects (the pre-trained mode rescores its calibration
    set in it): after a failure the caller does them again on the final model.
    ``check`` is first run on the model as it was: if that fails too, the model was
    broken before this batch, and the batch is learned and checked as it would have been
    without the guard (its error raised). A programming error (``MODEL_ERRORS``) is raised
    at once, the model restored as it was.

    >>> from river import linear_model
    >>> model = linear_model.LogisticRegression()
    >>> def learn(items):
    ...     for x, y in items:
    ...         model.learn_one(x, y)
    >>> def check(items):
    ...     for x, _ in items:
    ...         score_sorted(model, x)  # raises NonFiniteScore
    ...     return lookahead(model, *items[-1]) if items else None
    >>> items = [({"a": 1.0}, True), ({"a": float("nan")}, False), ({"a": -1.0}, False)]
    >>> [(item[0], why[:43]) for item, why in learn_checked(model, items, learn, check)]
    [({'a': nan}, "left the model's output non-finite (the wra")]
    >>> round(model.weights["a"], 4)
    0.0101
    """
    # numpy's overflow warnings while learning poison: the report says it better
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        saved = snapshot(model)
        try:
            return _learn_checked(model, items, learn, check, saved)
        except MODEL_ERRORS:
            restore(model, saved)
            raise


def _learn_checked(model, items: list, learn, check, saved: bytes) -> list[tuple[object, str]]:
    why = _attempt(learn, check, items)
    if why is None:
        return []
    restore(model, saved)
    if _attempt(learn, check, []) is not None:  # broken before: nothing to undo
        learn(items)
        check(items)
        return []
    bad = []
    start, rest = saved, list(items)
    while True:
        lo, hi = 0, len(rest)  # rest[:lo] passes, rest[:hi] fails (with ``why``)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            restore(model, start)
            found = _attempt(learn, check, rest[:mid])
            if found is None:
                lo = mid
            else:
                hi, why = mid, found
        bad.append((rest[hi - 1], why))
        restore(model, start)
        learn(rest[: hi - 1])
        rest = rest[hi:]
        if not rest:
            return bad
        start = snapshot(model)
        why = _attempt(learn, check, rest)
        if why is None:
            return bad
        restore(model, start)


def learn_and_score(model, x: dict, y):
    """The plain step of ``ModelGuard.learn_step``: learn, then score ``x``."""
    model.learn_one(x, y)
    return score_sorted(model, x)


def learn_and_look(model, x: dict, y) -> tuple[float, bytes]:
    """The fully checked step of ``ModelGuard.learn_step`` (mode "va", whose predictions
    teach copies of the model the object: a model broken silently would fail the next
    one): learn, score ``x``, pickle the model, and take one more step on a copy of that
    pickle (``lookahead``). Returns ``(score, pickle)``: the next prediction copies the
    model from that pickle."""
    s = learn_and_score(model, x, y)
    data = snapshot(model)
    why = lookahead(model, x, y, data=data)
    if why is not None:
        raise _Broken(why)
    return s, data


class ModelGuard:
    """The guard of one model (see the module docstring): its reports, and the learning
    of batches (``learn_batch``) or of every label (``learn_step``, with its pickle and
    log). With ``by``, the categories share their model's guard.

    ``given`` counts the labels given to ``learn_step`` (for the reports' ``labels_ago``).
    """

    def __init__(self, model, period: int = SNAPSHOT_PERIOD):
        self.model = model
        self.period = period
        self.given = 0
        self.unlearned: list[Unlearned] = []  # reports the classifier has not taken yet
        self._saved: bytes | None = None  # "sva"/"va": the model before the logged steps
        self._log: list = []  # (position, x, y) learned since, in order

    def report(self, x: dict, y, reason: str, labels_ago: int, taken: bool) -> None:
        feature, value = suspect(x)
        self.unlearned.append(Unlearned(x, y, reason, feature, value, labels_ago, taken))

    # ------------------------------------------------------------------ batches
    def learn_batch(self, items: list, learn, check, current: int, taken: bool = True) -> list:
        """``learn_checked`` over ``items`` = ``(position, x, y)``: the ones left out are
        reported (``taken``: the calibration set has them), their labels counted back from
        ``current``, the position of the last label given. Returns them. A programming
        error is raised naming its suspect (``model_error``), the model as it was."""
        try:
            bad = learn_checked(self.model, items, learn, check)
        except MODEL_ERRORS as exc:
            raise model_error(exc, (x for _, x, _ in items)) from exc
        for (position, x, y), why in bad:
            self.report(x, y, why, current - position, taken)
        return [item for item, _ in bad]

    def learn_rows(self, xs: list, labels: list) -> list:
        """Modes "sva" and "va", a model with river's ``learn_many``: it learns the rows
        ``xs`` (canonical dicts, kept) as one mini-batch, checked by every row's score and
        one more step; rows to blame are refused (reported, not taken). The ``(x, label,
        score)`` of the others, in order: the label as given, the score after the batch."""
        import pandas as pd

        model = self.model
        self.settle()  # a step logged since the last pickle may have broken it silently
        first = self.given + 1
        self.given += len(xs)
        items = [(first + i, x, bool(y)) for i, (x, y) in enumerate(zip(xs, labels, strict=True))]
        scores = {}

        def learn(part):
            if part:
                model.learn_many(pd.DataFrame([x for _, x, _ in part]),
                                 pd.Series([y for _, _, y in part]))  # fmt: skip

        def check(part):
            scores.clear()
            for position, x, _ in part:
                scores[position] = score_sorted(model, x)
            return lookahead(model, *part[-1][1:]) if part else None

        bad = self.learn_batch(items, learn, check, self.given, taken=False)
        self.changed()
        pairs = zip(items, labels, strict=True)
        if not bad:
            return [(x, y, scores[position]) for (position, x, _), y in pairs]
        refused = {position for position, _, _ in bad}  # the last attempt's scores: stale
        return [(x, y, score_sorted(model, x)) for (position, x, _), y in pairs
                if position not in refused]  # fmt: skip

    # ------------------------------------------------------------------ every label
    def learn_step(self, x: dict, y, step):
        """``step(model, x, y)``: the model learns ``(x, y)`` and returns what the caller
        needs (``x``'s score after, ...), raising ``NonFiniteScore`` if that is not
        finite. Returns it, or None if the label was refused (reported, not taken: the
        caller keeps nothing of it).
        Another error of the step is raised once the model is back as it was (a
        programming error naming its suspect, ``model_error``). ``x`` is
        kept until the next pickle: it must not change."""
        if self._saved is None or len(self._log) >= self.period:
            self._pickle()
        self.given += 1
        try:
            out = step(self.model, x, y)
        except (NonFiniteScore, ArithmeticError) as exc:  # an overflow is poison too
            return self._recover(x, y, step, _failure(exc))
        except MODEL_ERRORS as exc:
            self.given -= 1
            self._replay(checked=False)
            raise model_error(exc, [x]) from exc
        except BaseException:
            self.given -= 1
            self._replay(checked=False)
            raise
        self._log.append((self.given, x, y))
        return out

    def settle(self) -> None:
        """Before the model is saved, or taught outside ``learn_step``: check the steps
        logged since the last pickle and pickle the model (see ``_pickle``)."""
        if self._log:
            self._pickle()

    def changed(self) -> None:
        """The model was taught outside ``learn_step`` (a checked batch): the next step
        pickles it afresh."""
        self._saved, self._log = None, []

    def _pickle(self) -> None:
        """Check the model as it is (one more step with the last logged label, on a
        copy), undo the logged steps that broke it if that fails, and pickle it: the log
        starts afresh. Every ``period`` labels, and before the model is saved."""
        data = snapshot(self.model)
        if self._log and lookahead(self.model, *self._log[-1][1:], data=data) is not None:
            self._replay(checked=True)
            data = snapshot(self.model)
        self._saved = data
        self._log = []

    def _replay(self, checked: bool) -> None:
        """Back to the pickle, then the logged steps again; ``checked``: each with the
        full check (its score, one more step), one that fails undone and reported."""
        model = self.model
        restore(model, self._saved)
        if not checked:
            for _, x, y in self._log:
                model.learn_one(x, y)
            return
        kept = []
        for entry in self._log:
            position, x, y = entry
            before = snapshot(model)
            why = _checked_step(model, x, y, learn_and_score)[1]
            if why is None:
                kept.append(entry)
            else:
                restore(model, before)
                self.report(x, y, why, self.given - position, True)
        self._log = kept

    def _recover(self, x: dict, y, step, why: str):
        """The step of ``(x, y)`` failed with ``why``: replay the log checked (an earlier
        label may have broken the model silently), then try it once more, checked."""
        self._replay(checked=True)
        model = self.model
        before = snapshot(model)
        out, again = _checked_step(model, x, y, step)
        if again is None:
            self._log.append((self.given, x, y))
            return out
        restore(model, before)
        self.report(x, y, why, 0, False)
        return None


def _checked_step(model, x: dict, y, step) -> tuple:
    """``(step's result, None)`` if ``step`` teaches the model ``(x, y)`` and one more
    step on a copy leaves its output finite, else ``(None, what happened)``."""
    try:
        out = step(model, x, y)
        why = lookahead(model, x, y)
    except Exception as exc:  # noqa: BLE001 - any error of the step: it failed
        return None, _failure(exc)
    return (out, None) if why is None else (None, why)


def _failure(exc: Exception) -> str:
    """The reason of a learning step that raised ``exc``."""
    if isinstance(exc, _Broken):  # its message is the reason itself
        return str(exc)
    if isinstance(exc, NonFiniteScore):
        return f"left the model's output non-finite ({exc})"
    return f"raised {exc!r}"
