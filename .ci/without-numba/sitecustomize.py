"""Block numba in every Python process started with this directory on PYTHONPATH.

``import numba`` then raises ImportError, as on a Python that numba does not support:
CI runs the store, learner, processor and demo tests this way (see .ci/run), and
tests/test_without_numba.py does so in a subprocess. Child processes inherit PYTHONPATH,
so the processor's producer process and the demo's subprocesses are blocked too.
"""

import sys

sys.modules["numba"] = None
