"""Category churn: a Mondrian key (``by``) with more categories than ``max_categories``.

Mondrian calibration keeps at most ``max_categories`` categories, the least recently
labelled evicted first (``streamcal.learner.mondrian``). On a key such as a user or
merchant id, with far more values than that, most categories are evicted before they
gather a calibration set of their own: their objects are then answered from the pooled
calibration set, with the pooled (marginal) guarantee only, and the per-category one
that ``by`` was chosen for rarely holds. ``CategoryChurn`` counts the evictions of such
cold categories and says so once, as a ``CategoryChurnWarning`` naming the key and what
to do, when they are at least half of ``max_categories`` evictions or more (the table
turned over, mostly with categories that never answered on their own).

>>> churn = CategoryChurn(threshold=10)
>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     for _ in range(4):
...         churn.evicted(size=1, evictions=churn.cold + 1, by="user_id", max_categories=3)
>>> churn.cold, churn.warned, len(caught)
(4, True, 1)
>>> "by='user_id'" in str(caught[0].message) and "max_categories=3" in str(caught[0].message)
True
"""

from __future__ import annotations

import warnings

__all__ = ["CategoryChurn", "CategoryChurnWarning"]


class CategoryChurnWarning(UserWarning):
    """The Mondrian key (``by``) churns: most evicted categories had too few calibration
    pairs to answer on their own, so most answers come from the pooled set. Issued once
    per classifier; to filter: ``warnings.simplefilter("ignore", CategoryChurnWarning)``."""


class CategoryChurn:
    """Counts the categories evicted with fewer than ``threshold`` calibration pairs
    (``cold``) and warns once (``warned``) when they show the key churns (see the module
    docstring). Plain data in ``to_state``."""

    # what a category holds, for the message (the regressor's: "residuals")
    items = "calibration pairs"

    def __init__(self, threshold: int, items: str | None = None):
        self.threshold = max(1, threshold)  # a category with no pair at all is cold
        if items is not None:
            self.items = items
        self.cold = 0
        self.warned = False

    def evicted(self, size: int, evictions: int, by, max_categories: int,
                stacklevel: int = 5) -> None:  # fmt: skip
        """A category holding ``size`` calibration pairs was evicted, the ``evictions``-th
        (``stacklevel``: of the warning, the caller of the learner's ``learn_one``)."""
        if size < self.threshold:
            self.cold += 1
        if self.warned or evictions < max_categories or 2 * self.cold < evictions:
            return
        self.warned = True
        key = by.__name__ if callable(by) and hasattr(by, "__name__") else repr(by)
        warnings.warn(
            f"by={key}: {self.cold:,} of the {evictions:,} categories evicted so far had "
            f"fewer than {self.threshold} {self.items} of their own: the key has more "
            f"categories than max_categories={max_categories} keeps, so most answers come "
            "from the pooled set (the marginal guarantee only, not the "
            "per-category one). Raise max_categories, choose a coarser key, or drop by "
            "(warned once)",
            CategoryChurnWarning,
            stacklevel=stacklevel,
        )

    def to_state(self) -> dict:
        return {"cold": self.cold, "warned": self.warned}

    @classmethod
    def from_state(cls, state: dict | None, threshold: int) -> CategoryChurn:
        """The counter ``to_state`` described (None, from before it: a new one)."""
        self = cls(threshold)
        if state is not None:
            self.cold, self.warned = state["cold"], state["warned"]
        return self
