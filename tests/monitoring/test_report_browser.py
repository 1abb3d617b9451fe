"""The report as a person sees it: report.html opened in headless Chromium (Debian's
``chromium``). Every figure loads, the summary shows real figures (the event rate of the
run, not the 0 of the line a processor writes when it stops), and in the loss figure the
calibrated curve shows where the protected one coincides with it."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess

import orjson
import pytest

from streamcal.monitoring import CalibrationTracker

pytest.importorskip("matplotlib")

# Runs in the page once it has loaded: what loaded, what the cells say, and how many
# pixels of the loss figure's left panel are drawn in p's colour and in protection's.
PROBE = """<script>
window.addEventListener("load", () => {
  const near = (d, i, rgb) => rgb.every((c, k) => Math.abs(d[i + k] - c) <= 10);
  const imgs = [...document.images];
  const out = {
    images: imgs.map(i => ({alt: i.alt, ok: i.complete && i.naturalWidth > 0})),
    cells: Object.fromEntries([...document.querySelectorAll("td[data-key]")]
      .map(td => [td.dataset.key, td.textContent])),
  };
  const loss = imgs.find(i => i.alt === "loss.png");
  const canvas = document.createElement("canvas");
  canvas.width = loss.naturalWidth; canvas.height = loss.naturalHeight;
  const ctx = canvas.getContext("2d");
  ctx.drawImage(loss, 0, 0);
  const d = ctx.getImageData(0, 0, canvas.width / 2, canvas.height).data;
  out.calibrated = 0; out.protected = 0;
  for (let i = 0; i < d.length; i += 4) {
    if (near(d, i, [0x1f, 0x5f, 0xa8])) out.calibrated++;
    if (near(d, i, [0x2a, 0x9d, 0x4b])) out.protected++;
  }
  const pre = document.createElement("pre");
  pre.id = "probe"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path is not None:
            return path
    pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")


def a_processor_log(path) -> None:
    """A metric log as a processor writes it with protection on and the stream unchanged
    (the protected probability is p throughout), 100 events/s, and the line it writes
    when it stops after a few idle seconds (events_per_s 0)."""
    rng = random.Random(3)
    t = CalibrationTracker(window=100)
    lines = []
    for i in range(1, 1001):
        s = rng.random()
        p0, p1 = max(0.0, s - 0.05), min(1.0, s + 0.05)
        p = p1 / (1 - p0 + p1)
        t.update(p0, p1, int(rng.random() < s), score=min(1.0, 1.3 * s), p=p, p_protected=p)
        if i % 50 == 0:
            t.update_protection(rng.random(), False, None, alpha=0.01, protection_gain=0.0)
            lines.append({**t.snapshot(reliability=True), "ts": 1.7e9 + i / 100, "events": i,
                          "predictions": i, "events_per_s": 100.0 + rng.random()})  # fmt: skip
    lines.append({**lines[-1], "ts": lines[-1]["ts"] + 5.0, "events_per_s": 0.0})
    path.write_bytes(b"".join(orjson.dumps(ln) + b"\n" for ln in lines))


@pytest.mark.slow  # a browser start and a report: 5-10 s
def test_the_report_in_a_real_browser(tmp_path):
    from streamcal.monitoring.report import write_report

    browser = chromium()
    a_processor_log(tmp_path / "metrics.jsonl")
    page = write_report(tmp_path / "metrics.jsonl", tmp_path / "report")
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    out = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    found = re.search(r'<pre id="probe">(.*?)</pre>', out.stdout, re.S)
    assert found, out.stderr[-2000:]
    seen = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))

    figures = {i["alt"] for i in seen["images"]}
    assert {"reliability.png", "loss.png", "width.png", "band.png", "alarm.png"} <= figures
    assert all(i["ok"] for i in seen["images"]), seen["images"]
    cells = seen["cells"]
    # The run's rate (100 events/s while events came), not the stop line's 0.
    assert 99 <= float(cells["events_per_s"]) <= 102, cells["events_per_s"]
    for key in ("labels", "events", "log_loss", "protected_log_loss", "mean_p0", "mean_p1"):
        assert float(cells[key]) > 0, (key, cells[key])
    # Where protection equals p, p's curve still shows (it was hidden under protection's).
    assert seen["calibrated"] >= 0.5 * seen["protected"] > 0, seen
