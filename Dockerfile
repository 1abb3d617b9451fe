# The streamcal image used by docker-compose.yml (processor and demo producer).
# Build: docker build -t streamcal .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1

WORKDIR /src
# Only what the package needs: the image does not change when tests or docs do.
COPY pyproject.toml README.md LICENSE ./
COPY streamcal ./streamcal
# [report] adds matplotlib for `streamcal report`; the broker (the [demo] extra) is not
# needed in a container: compose runs Apache Kafka.
RUN pip install ".[report,fast]" \
    && useradd --system --uid 10001 --home-dir /data streamcal \
    && mkdir -p /data /state \
    && chown streamcal /data /state

USER streamcal
WORKDIR /data
# Checkpoints go to /state, metric logs and reports to /data (named volumes in compose).
VOLUME ["/data", "/state"]
CMD ["streamcal", "--help"]
