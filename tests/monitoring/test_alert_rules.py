"""The shipped Prometheus rules (deploy/prometheus/alerts.yml): promtool checks them and
runs their unit tests (alerts_test.yml), and every alert carries what an on-call person
needs: a severity, a summary, a description and a runbook in docs/alerts.md."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "alerts_test.yml"


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    return path


def alerts() -> list[dict]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors of the headings: lower case, punctuation dropped, spaces to -."""
    heads = re.findall(r"^#+ (.+)$", markdown, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_promtool_checks_the_rules():
    out = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_rule_unit_tests_pass():
    out = subprocess.run([promtool(), "test", "rules", str(RULE_TESTS)], capture_output=True,
                         text=True, timeout=120, cwd=RULE_TESTS.parent)  # fmt: skip
    assert out.returncode == 0 and "SUCCESS" in out.stdout, out.stdout + out.stderr


def test_every_alert_is_named_labelled_annotated_and_has_a_runbook():
    rules = alerts()
    names = [r["alert"] for r in rules]
    assert {"StreamcalExchangeabilityAlarm", "StreamcalCalibrationBandBroken",
            "StreamcalDeadLetters", "StreamcalPendingNearBound", "StreamcalProcessorStalled",
            "StreamcalTargetDown"} <= set(names)  # fmt: skip
    sections = anchors((ROOT / "docs" / "alerts.md").read_text())
    for rule in rules:
        name = rule["alert"]
        assert re.fullmatch(r"Streamcal(?:[A-Z][a-z0-9]+)+", name), name  # CamelCase
        assert rule["labels"]["severity"] in ("critical", "warning", "info"), name
        notes = rule["annotations"]
        assert {"summary", "description", "runbook_url"} <= set(notes), name
        # Absolute (Alertmanager has no page to resolve a relative link against): the
        # base is the external label streamcal_docs_url, else a name that never resolves.
        page, _, anchor = notes["runbook_url"].partition("#")
        base = '{{ or $externalLabels.streamcal_docs_url "https://streamcal.invalid/docs" }}'
        assert page == base + "/alerts.md" and anchor in sections, (name, anchor)


def test_every_alert_has_a_unit_test():
    tested = set(re.findall(r"alertname: (\w+)", RULE_TESTS.read_text()))
    assert {r["alert"] for r in alerts()} <= tested


def test_promtool_checks_the_shipped_configuration():
    config = ROOT / "deploy" / "prometheus" / "prometheus.yml"
    out = subprocess.run([promtool(), "check", "config", str(config)], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0 and "1 rule files found" in out.stdout, out.stdout + out.stderr
