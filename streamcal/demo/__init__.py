"""The demo: the whole pipeline on one machine, and the local broker the tests use.

Not part of a production deployment (that is ``streamcal.stream``): this package sits
between ``stream`` and ``cli`` in the layer order, uses the processor and the monitoring
layer, and is used by ``streamcal demo``. Modules, one idea each:

* ``broker`` -- ``LocalBroker``: tansu (from the ``demo`` extra) on a free loopback port.
* ``tls`` -- ``TlsTerminator``: the TLS front end the broker uses when tansu cannot.
* ``datasets`` -- the data sets to replay: river's Phishing, a drifting synthetic one.
* ``replay`` -- a data set as event and label messages, labels late or missing.
* ``run`` -- ``run_demo``: broker, topics, replay, processor, summary, report.
* ``text`` -- the demo's text: metric lines, the summary table, dead letters.
* ``dead_letters`` -- reading the dead-letter topic back.

Kafka, river and the processor are imported only when a demo runs.
"""
