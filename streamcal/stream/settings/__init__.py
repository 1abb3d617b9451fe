"""The machinery of the processor's settings, which ``streamcal.stream.config`` declares.

* ``constraints``: what a value may be (``AtLeast``, ``OneOf``, ``Size``, ``Seconds``...);
* ``declaration``: ``setting`` declares a field once; ``declared`` gives each one's flag,
  environment variable, help and check;
* ``sources``: flags, ``STREAMCAL_*`` variables and TOML, read and merged;
* ``rules``: the rules across settings, in order, and ``validate``;
* ``learner``: the classifier's settings from the processor's.

Kept free of river and numba: ``streamcal run --help`` reads the declarations.
"""
