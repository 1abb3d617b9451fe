"""ClassifierSettings is the one owner of the classifier's defaults and rules: the learner,
the processor's flags, the monitoring's bound and the checkpoint fingerprint agree with it."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from river import linear_model

from streamcal import Protector, VennAbersClassifier
from streamcal.learner.mondrian import MondrianVennAbers
from streamcal.learner.settings import (
    DEFAULT_ALARM_ALPHA,
    DEFAULT_MAX_CATEGORIES,
    FIELDS,
    HORIZON_SETTINGS,
    MONDRIAN_SETTINGS,
    ClassifierSettings,
)
from streamcal.monitoring.categories import CategoryBreakdown
from streamcal.monitoring.tracker import CalibrationTracker
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.state.checkpoint import CheckpointError
from streamcal.stream.state.fingerprint import FINGERPRINT, check_fingerprint
from streamcal.stream.unit import CalibrationUnit


def _default(callable_, name):
    return inspect.signature(callable_).parameters[name].default


def test_the_classifier_signature_has_the_settings_defaults():
    defaults = ClassifierSettings()
    params = inspect.signature(VennAbersClassifier).parameters
    assert [p for p in params if p != "model"] == [*FIELDS, *HORIZON_SETTINGS]
    for name in (*FIELDS, *HORIZON_SETTINGS):
        assert params[name].default == getattr(defaults, name), name


def test_the_processor_builds_the_classifier_with_the_settings_defaults():
    """All but protect, which the processor turns on (--protect, --alarm), at the
    protector's default level and without the look-up (it passes each label's p back);
    --no-protect keeps the alarm alone, --no-protect --no-alarm neither."""
    clf = CalibrationUnit(ProcessorConfig.build()).clf
    protect = {"alpha": DEFAULT_ALARM_ALPHA, "lookup": False}
    assert clf.settings == ClassifierSettings(protect=protect)
    assert ProcessorConfig.build().classifier_settings() == clf.settings
    assert ProcessorConfig.build().alarm_alpha == DEFAULT_ALARM_ALPHA == Protector().alpha
    alone = CalibrationUnit(ProcessorConfig.build(protect=False)).clf
    assert alone.settings == ClassifierSettings(protect={**protect, "recalibrate": False})
    off = CalibrationUnit(ProcessorConfig.build(protect=False, alarm=False)).clf
    assert off.settings == ClassifierSettings() and off.protect is False


def test_every_max_categories_default_is_the_settings_one():
    assert ClassifierSettings().max_categories == DEFAULT_MAX_CATEGORIES
    for owner in (MondrianVennAbers, CategoryBreakdown, CalibrationTracker):
        assert _default(owner, "max_categories") == DEFAULT_MAX_CATEGORIES, owner
    unit = CalibrationUnit(ProcessorConfig.build(by="shop"))
    assert unit.tracker.to_state()["categories"]["max_categories"] == DEFAULT_MAX_CATEGORIES
    assert unit.clf.max_categories == DEFAULT_MAX_CATEGORIES


BAD = [
    {"mode": "ivap"},
    {"merge": "geometric"},
    {"window": 0},
    {"refresh_every": 0},
    {"mode": "va", "refresh_every": 5},
    {"by": "g", "max_categories": 0},
    {"by": "g", "min_category": -1},
    {"by": "g", "fallback": "nearest", "min_category": 3},
    {"by": "g", "min_category": 3, "fallback": "off"},
    {"by": "g", "mode": "va", "min_category": 3},
    {"by": "g", "mode": "va", "fallback": "pooled"},
    {"by": "g", "mode": "sva", "min_category": 3, "fallback": "pooled"},
    {"protect": "yes"},
    {"protect": {"alpha": 0}},
    {"protect": {"burn_in": -1}},
    {"protect": {"lookup": 1}},
    {"protect": {"beta": 1}},
]


@pytest.mark.parametrize("settings", BAD, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_learner_and_processor_refuse_with_the_same_message(settings):
    with pytest.raises(ValueError) as learner:
        VennAbersClassifier(linear_model.LogisticRegression(), **settings)
    with pytest.raises(ValueError) as alone:
        ClassifierSettings(**settings)
    assert str(learner.value) == str(alone.value)
    bad = next(k for k in settings if k != "by")
    assert bad in str(alone.value)  # the message names the setting (the flag)
    if "protect" in settings:  # the processor's flags are --protect and --alarm-alpha
        return
    with pytest.raises(ValueError) as processor:
        ProcessorConfig.build(**settings)
    assert str(processor.value) == str(alone.value)


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.5, 2.0, float("nan")])
@pytest.mark.parametrize("protect", [True, False])
def test_the_processor_refuses_an_alarm_alpha_as_the_protector_does(alpha, protect):
    with pytest.raises(ValueError) as processor:
        ProcessorConfig.build(protect=protect, alarm_alpha=alpha)
    with pytest.raises(ValueError) as learner:
        VennAbersClassifier(linear_model.LogisticRegression(), protect={"alpha": alpha})
    assert str(processor.value) == str(learner.value)
    assert str(learner.value).startswith("protect: alpha must be")


def test_protect_is_a_setting_like_the_others():
    """Compared by value (a dict is equal to an equal dict), hashable although a dict is
    not, and the classifier built from the settings has them."""
    a = ClassifierSettings(protect={"alpha": 0.05, "lookup": False})
    assert a == ClassifierSettings(protect={"lookup": False, "alpha": 0.05})
    assert a != ClassifierSettings(protect={"alpha": 0.05}) != ClassifierSettings()
    assert hash(a) == hash(ClassifierSettings())
    clf = VennAbersClassifier(linear_model.LogisticRegression(), **a.as_dict())
    assert clf.settings == a and clf.protect == {"alpha": 0.05, "lookup": False}
    assert a.protect_params == {"alpha": 0.05, "lookup": False}
    assert ClassifierSettings(protect=True).protect_params == {}
    assert ClassifierSettings().protect_params is None


@pytest.mark.parametrize("name", MONDRIAN_SETTINGS[1:])
def test_the_processor_refuses_mondrian_flags_without_by(name):
    value = {"min_category": 3, "fallback": "pooled", "max_categories": 5}[name]
    with pytest.raises(ValueError, match=f"{name} needs by"):
        ProcessorConfig.build(**{name: value})


def test_given_fills_in_the_defaults_for_none():
    assert ClassifierSettings.given(window=None, mode=None) == ClassifierSettings()
    assert ClassifierSettings.given(window=7, by="g").as_dict() == {
        **ClassifierSettings().as_dict(),
        "window": 7,
        "by": "g",
    }


def test_settings_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ClassifierSettings().window = 3


@pytest.mark.parametrize(
    "mode, refresh_every, period",
    [("pretrained", None, 50), ("pretrained", 7, 7), ("sva", None, None), ("va", None, None)],
)
def test_refresh_period(mode, refresh_every, period):
    settings = ClassifierSettings(mode=mode, window=50, refresh_every=refresh_every)
    assert settings.refresh_period == period == settings.refresh_period_for("binary")


@pytest.mark.parametrize("refresh_every, period", [(None, 100), (7, 7)])
def test_multiclass_refresh_period_is_two_windows_by_default(refresh_every, period):
    settings = ClassifierSettings(window=50, refresh_every=refresh_every)
    assert settings.refresh_period_for("multiclass") == period


def test_the_fingerprint_compares_the_settings_in_effect():
    """A setting left to its default and the same value given are one setting; another
    value is refused, naming it."""
    state = CalibrationUnit(ProcessorConfig.build()).to_state()
    assert set(state["fingerprint"]) == set(FINGERPRINT)
    assert state["fingerprint"]["window"] is None  # recorded as given
    same = ProcessorConfig.build(window=ClassifierSettings().window, mode="pretrained")
    check_fingerprint(state, same)
    others = ({"window": 999}, {"merge": "mean"}, {"by": "g"}, {"model": "gnb"},
              {"protect": False}, {"alarm_alpha": 0.001})  # fmt: skip
    for other in others:
        name = next(iter(other))
        with pytest.raises(CheckpointError, match=f"written with {name}="):
            check_fingerprint(state, ProcessorConfig.build(**other))
