"""The shipped Grafana dashboard (deploy/grafana/streamcal.json): it is what its generator
makes, imports anywhere (datasource as an input), selects units and categories, and
queries only series that streamcal exports."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

from prometheus_client import generate_latest

from streamcal.monitoring import PrometheusExporter
from tests.monitoring.test_prometheus import a_metric_line

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "deploy" / "grafana" / "streamcal.json"


def generator():
    path = ROOT / "deploy" / "grafana" / "streamcal_dashboard.py"
    spec = importlib.util.spec_from_file_location("streamcal_dashboard", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def queries(dashboard: dict) -> list[str]:
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def test_the_shipped_json_is_the_generators_output():
    assert SHIPPED.read_text() == generator().render(), (
        "deploy/grafana/streamcal.json is stale: run "
        "python deploy/grafana/streamcal_dashboard.py > deploy/grafana/streamcal.json"
    )


def test_it_imports_anywhere_and_selects_the_unit_and_category():
    d = json.loads(SHIPPED.read_text())
    assert [i["name"] for i in d["__inputs"]] == ["DS_PROMETHEUS"]
    assert d["__inputs"][0]["pluginId"] == "prometheus"
    for panel in d["panels"]:
        assert panel["datasource"] == "${DS_PROMETHEUS}", panel["title"]
        assert all(t["datasource"] == "${DS_PROMETHEUS}" for t in panel["targets"])
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert {"unit", "category", "window"} <= set(variables)
    # Provisioned (no import dialog), ${DS_PROMETHEUS} resolves through this variable.
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert variables["DS_PROMETHEUS"]["query"] == "prometheus"
    assert all('unit=~"$unit"' in q for q in queries(d) if "streamcal_" in q)


def test_every_query_names_series_streamcal_exports():
    line = {**a_metric_line(), "unit": "0", "instance": "a"}
    exporter = PrometheusExporter(None)
    exporter.update(line)
    exported = set(re.findall(r"^(streamcal_\w+)", generate_latest(exporter.registry).decode(),
                              re.M))  # fmt: skip
    exporter.close()
    used = {n for q in queries(json.loads(SHIPPED.read_text()))
            for n in re.findall(r"streamcal_\w+", q)}  # fmt: skip
    assert len(used) > 15 and used <= exported, used - exported
