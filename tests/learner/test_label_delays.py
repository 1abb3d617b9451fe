"""LabelDelays: says once when the classes' label delays differ, and stays quiet when
delays do not depend on the outcome."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal.learner.label_delays import LabelDelays


def feed(delays: LabelDelays, pairs) -> list[str]:
    return [text for y, d in pairs if (text := delays.add(y, d)) is not None]


@pytest.mark.parametrize("seed", range(20))
def test_same_delay_distribution_for_both_classes_never_warns(seed):
    rng = random.Random(seed)
    # imbalanced classes, a heavy-tailed delay independent of the outcome
    pairs = [(rng.random() < 0.1, rng.expovariate(1 / 500)) for _ in range(5000)]
    assert feed(LabelDelays(), pairs) == []


@pytest.mark.parametrize("seed", range(5))
def test_outcome_dependent_delays_warn_once_naming_both_classes(seed):
    rng = random.Random(seed)
    pairs = []
    for _ in range(5000):
        y = rng.random() < 0.3
        pairs.append((y, 40 if y else 3000))
    texts = feed(LabelDelays(advice="set label_horizon"), pairs)
    assert len(texts) == 1
    assert "class True" in texts[0] and "class False" in texts[0]
    assert texts[0].endswith("set label_horizon")


def test_a_class_below_min_labels_is_not_compared():
    delays = LabelDelays(min_labels=50)
    pairs = [(True, 10)] * 1000 + [(False, 10_000)] * 49
    assert feed(delays, pairs) == []
    assert delays.add(False, 10_000) is not None  # the 50th label of False


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.floats(0, 1e6)), max_size=300),
       st.floats(1.5, 20))  # fmt: skip
def test_warns_exactly_when_the_typical_delays_are_more_than_factor_apart(pairs, factor):
    delays = LabelDelays(factor=factor, min_labels=5)
    texts = []
    for i, (y, d) in enumerate(pairs):
        text = delays.add(y, d)
        seen = pairs[: i + 1]
        counts = {c: sum(1 for z, _ in seen if z == c) for c, _ in seen}
        typical = delays.typical()
        ratio = (max(typical.values()) + 1) / (min(typical.values()) + 1)
        due = len(counts) >= 2 and min(counts.values()) >= 5 and ratio > factor
        assert (text is not None) == (due and not texts)
        if text is not None:
            texts.append(text)


@pytest.mark.parametrize("kwargs", [{"factor": 1.0}, {"min_labels": 0}])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        LabelDelays(**kwargs)
