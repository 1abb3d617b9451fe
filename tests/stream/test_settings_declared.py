"""Each setting of ``streamcal run`` is declared once, and everything comes from that
declaration: its flag, its environment variable, its help and its check."""

from __future__ import annotations

import re

import pytest

from streamcal.cli import build_parser
from streamcal.cli.run import _GROUPS
from streamcal.stream.config import SETTINGS, ProcessorConfig
from streamcal.stream.settings.constraints import Checked

IDS = [s.name for s in SETTINGS]


def _run_help() -> str:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return sub.choices["run"].format_help()


def _text(s) -> str:
    """The default of ``s`` as a user would write it."""
    if s.type is bool:
        return "true" if s.default else "false"
    return s.constraint.show(s.default) if s.constraint else str(s.default)


@pytest.mark.parametrize("s", SETTINGS, ids=IDS)
def test_every_setting_has_a_flag_a_variable_help_and_a_check(s):
    assert s.env == "STREAMCAL_" + s.name.upper()
    assert s.help.strip() and s.group in _GROUPS
    assert s.constraint is not None or s.type is bool  # a bool's type is its check
    if s.flag is None:  # the environment only: a secret, never on a command line
        assert s.secret
        assert not re.search(f"--{s.name.replace('_', '-')}\\b(?!-)", _run_help())
    else:
        assert s.flag == "--" + s.name.replace("_", "-")
        help_text = " ".join(_run_help().split())  # argparse wraps the lines
        assert f"{s.flag} " in help_text and f"${s.env})" in help_text


@pytest.mark.parametrize("s", [s for s in SETTINGS if s.default is not None], ids=lambda s: s.name)
def test_the_flag_and_the_variable_read_what_the_help_shows(s):
    default = ProcessorConfig.build()
    from_env = ProcessorConfig.from_sources({}, {s.env: _text(s)})
    assert getattr(from_env, s.name) == s.default and from_env == default
    if s.flag is None:
        return
    if s.type is bool:  # --name gives True, --no-name False
        argv = [s.flag if s.default else "--no-" + s.flag[2:]]
    else:
        argv = [s.flag, _text(s)]
    args = build_parser().parse_args(["run", *argv])
    assert ProcessorConfig.from_sources(vars(args), {}) == default


@pytest.mark.parametrize("s", SETTINGS, ids=IDS)
def test_each_constraint_refuses_a_bad_value_naming_the_setting(s):
    bad = "maybe" if s.type is bool else s.constraint.bad
    with pytest.raises(ValueError) as exc:  # as given, not read from text (" " is None)
        ProcessorConfig(**{s.name: bad}).validate()
    message = str(exc.value)
    # With the alarm on, the learner refuses its level first, with its own words (the
    # processor's and the learner's messages are one: tests/learner/test_settings.py).
    named = "protect: alpha" if s.name == "alarm_alpha" else s.name
    assert named in message and "\n" not in message, message
    if not isinstance(s.constraint, Checked):
        # The processor's own constraints name the flag (or the variable) too; those
        # Checked by their owner (the learner, the horizon) keep its message.
        with pytest.raises(ValueError) as own:
            s.check(bad)  # the setting's own check, not another rule, refuses it
        assert s.name in str(own.value) and f"({s.where})" in str(own.value)
        if s.name != "alarm_alpha":  # the first refusal is the setting's own
            assert str(own.value) == message


def test_a_bad_value_from_the_environment_names_the_variable():
    with pytest.raises(ValueError, match=r"\$STREAMCAL_PENDING_MAX_BYTES: expected a size"):
        ProcessorConfig.from_sources({}, {"STREAMCAL_PENDING_MAX_BYTES": "lots"})


def test_precedence_is_flag_then_environment_then_file(tmp_path):
    toml = tmp_path / "s.toml"
    toml.write_text("[run]\nwindow = 10\ndedupe-window = 5\nlinger_ms = 7\n")
    env = {"STREAMCAL_WINDOW": "20", "STREAMCAL_DEDUPE_WINDOW": "6"}
    cfg = ProcessorConfig.from_sources({"window": 30, "linger_ms": None}, env, toml)
    assert (cfg.window, cfg.dedupe_window, cfg.linger_ms) == (30, 6, 7)
    with pytest.raises(ValueError, match="unknown setting 'windows'"):
        toml.write_text("windows = 3\n")
        ProcessorConfig.from_sources({}, {}, toml)


@pytest.mark.parametrize("settings", [{"mode": "sva"}, {"mode": "va"}, {"fallback": "off"}])
def test_the_multiclass_rules_are_the_learners_in_every_place(settings):
    """--task multiclass, VennAbersMultiClassifier and the binary classifier's switch to
    multiclass refuse what the multiclass side lacks with one message."""
    from river import naive_bayes

    from streamcal import VennAbersClassifier, VennAbersMultiClassifier

    with pytest.raises(ValueError) as processor:
        ProcessorConfig.build(task="multiclass", model="gnb", by="g", **settings)
    with pytest.raises(ValueError) as switch:
        VennAbersClassifier(naive_bayes.GaussianNB(), by="g", **settings).learn_one({"a": 1}, 2)
    assert str(switch.value).endswith(" but " + str(processor.value))
    if "mode" in settings:  # the multiclass classifier has no fallback to refuse
        with pytest.raises(ValueError) as learner:
            VennAbersMultiClassifier(naive_bayes.GaussianNB(), **settings)
        assert str(learner.value) == str(processor.value)
