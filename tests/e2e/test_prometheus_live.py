"""A real Prometheus (Debian's ``prometheus``) scrapes a live ``streamcal run
--metrics-port`` on a stream whose boundary turns over half-way, with the shipped rules
(deploy/prometheus/alerts.yml) loaded: ``StreamcalExchangeabilityAlarm`` fires, the
exposition passes ``promtool check metrics``, and the shipped dashboard's queries
(deploy/grafana/streamcal.json) run on that Prometheus, at least 80 % of them with data.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import orjson
import pytest

from streamcal.demo.broker import free_port
from tests._helpers import wait_until
from tests._kafka_helpers import T0, base_settings, produce_stream
from tests.stream.test_alarm_stream import _events

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
DOCS_URL = "https://docs.example.test/streamcal/docs"  # the runbooks' base, an external label
DASHBOARD = ROOT / "deploy" / "grafana" / "streamcal.json"
# The dashboard's variables as a person would set them: every job and unit, the unit as a
# whole (no category), a window that holds the whole run.
VARIABLES = {"$job": ".*", "$unit": ".*", "$category": "", "$window": "5m",
             "$__rate_interval": "1m"}  # fmt: skip

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _get(url: str, timeout: float = 5) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read()


def _api(base: str, path: str, **params) -> dict:
    body = json.loads(_get(f"{base}/api/v1/{path}?{urllib.parse.urlencode(params)}"))
    assert body["status"] == "success", body
    return body["data"]


def _start_prometheus(tmp_path: Path, target: str) -> tuple[subprocess.Popen, str]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("prometheus is not installed (Debian: apt-get install prometheus)")
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s,\n"
        f"         external_labels: {{streamcal_docs_url: '{DOCS_URL}'}}}}\n"
        f"rule_files: ['{RULES}']\n"
        "scrape_configs:\n"
        "  - job_name: streamcal\n"
        f"    static_configs: [{{targets: ['{target}']}}]\n"
    )
    port = free_port()
    log = (tmp_path / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    return proc, f"http://127.0.0.1:{port}"


def _ready(base: str, proc) -> bool:
    assert proc.poll() is None, "prometheus exited: see prometheus.log"
    try:
        return _get(f"{base}/-/ready", timeout=1).startswith(b"Prometheus")
    except OSError:
        return False


def _firing(base: str) -> list[dict]:
    return [a for a in _api(base, "alerts")["alerts"] if a["state"] == "firing"]


def test_prometheus_fires_the_alarm_and_runs_the_dashboard(
    kafka_broker, unique_topics, streamcal_run, tmp_path
):
    events = list(_events(1200, seed=9))  # the boundary turns over at event 600
    produce_stream(
        kafka_broker, unique_topics,
        [(e, {"id": e, "features": x}, T0 + 10 * i) for i, (e, x, _) in enumerate(events)],
        [(e, {"id": e, "label": y}, T0 + 10 * i + 1) for i, (e, _, y) in enumerate(events)],
    )  # fmt: skip
    metrics_port = free_port()
    log = tmp_path / "metrics.jsonl"
    settings = base_settings(
        kafka_broker, unique_topics, mode="pretrained", window=200, metrics_every=100,
        metrics_file=str(log), metrics_port=metrics_port, metrics_addr="127.0.0.1",
    )  # fmt: skip
    prometheus, base = _start_prometheus(tmp_path, f"127.0.0.1:{metrics_port}")
    try:
        wait_until(lambda: _ready(base, prometheus), 30, "prometheus ready")
        run = streamcal_run.popen(settings, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def done():
            assert run.poll() is None, f"streamcal run exited with {run.returncode}"
            lines = log.read_bytes().splitlines() if log.exists() else []
            return lines and orjson.loads(lines[-1])["labels"] == 1200

        wait_until(done, 60, "the run's last metric line")
        final = orjson.loads(log.read_bytes().splitlines()[-1])
        assert final["alarm"] == 1 and 600 < final["alarm_at"] <= 800

        # The exposition Prometheus scrapes passes Prometheus' own linter.
        text = _get(f"http://127.0.0.1:{metrics_port}/metrics").decode()
        promtool = shutil.which("promtool")
        if promtool is not None:
            out = subprocess.run([promtool, "check", "metrics"], input=text, text=True,
                                 capture_output=True, timeout=30)  # fmt: skip
            assert out.returncode == 0 and not (out.stdout + out.stderr).strip(), out.stdout
        assert "instance=" not in text and 'streamcal_log_loss_sum{unit="global"}' in text
        # Labels 1 ms after their events: each delay in the histogram's first bucket.
        assert 'streamcal_label_delay_seconds_bucket{le="1",unit="global"} 1200.0' in text

        alerts = wait_until(lambda: _firing(base), 30, "a firing alert")
        alarm = [a for a in alerts if a["labels"]["alertname"] == "StreamcalExchangeabilityAlarm"]
        assert alarm and alarm[0]["labels"]["unit"] == "global", alerts
        assert alarm[0]["labels"]["severity"] == "warning"
        runbook = f"{DOCS_URL}/alerts.md#streamcalexchangeabilityalarm"
        assert alarm[0]["annotations"]["runbook_url"] == runbook  # the external label's base
        # Nothing else is wrong with this run.
        assert {a["labels"]["alertname"] for a in alerts} == {"StreamcalExchangeabilityAlarm"}

        # Each of the dashboard's queries runs; at least 80 % return data. A rate needs two
        # scrapes of the run's counters.
        scrapes = 'count_over_time(streamcal_events_total{unit="global"}[5m]) >= 3'
        wait_until(lambda: _api(base, "query", query=scrapes)["result"], 30, "three scrapes")
        exprs = [t["expr"] for p in json.loads(DASHBOARD.read_text())["panels"]
                 for t in p["targets"]]  # fmt: skip
        empty = []
        for expr in exprs:
            for name, value in sorted(VARIABLES.items(), key=lambda kv: -len(kv[0])):
                expr = expr.replace(name, value)
            if not _api(base, "query", query=expr)["result"]:
                empty.append(expr)
        assert len(exprs) >= 15 and len(empty) <= 0.2 * len(exprs), empty
        # The one expected empty: consumer lag comes from a Kafka exporter, not run here.
        assert all("kafka_consumergroup_lag" in e for e in empty), empty
    finally:
        prometheus.terminate()
        prometheus.wait(timeout=30)
