"""One tree for the errors of streamcal: ``StreamcalError``, and beneath it a branch for
where things failed (a setting, a package, the input, the state, the broker, another
instance).

Each branch carries the exit status ``streamcal`` ends with when one of its errors stops a
command, and one line that says what to do (``streamcal --help`` lists them). Every
exception class streamcal defines derives from a branch, keeping the builtin base its
callers rely on (``class BadInput(InputError, ValueError)``), so ``except ValueError``
still catches it. Warnings are not errors: they keep their own classes.

Outside the layers, like ``streamcal._lazy``: every layer may import it, and it imports
nothing of streamcal.

>>> issubclass(InputLostError, InputError), InputLostError.exit_status
(True, 4)
>>> sorted({branch.exit_status for branch in BRANCHES})
[1, 2, 3, 4, 5]
"""

from __future__ import annotations

__all__ = [
    "BRANCHES",
    "BrokerError",
    "ConfigurationError",
    "DependencyError",
    "InputError",
    "InputLostError",
    "StateError",
    "StreamcalError",
    "SupersededError",
    "pre_release",
]


class StreamcalError(Exception):
    """Base of every error streamcal raises: ``except StreamcalError`` catches them all,
    and nothing from elsewhere."""

    exit_status = 1
    what_to_do = "read the message; a restart resumes from the last checkpoint"


class ConfigurationError(StreamcalError):
    """A setting, a flag or an option is wrong, or what it names (topics, a group, a
    listener's security) does not allow the run: refused before anything is done."""

    exit_status = 2
    what_to_do = "fix the setting the message names (see `streamcal COMMAND --help`)"


class DependencyError(StreamcalError):
    """An optional package or program that this needs is missing."""

    exit_status = 2
    what_to_do = "install the extra the message names (pip install 'streamcal-va[EXTRA]')"


class InputError(StreamcalError):
    """Input that cannot be read or used: a record batch, a message, a model's score."""

    exit_status = 3
    what_to_do = "fix the input the message names, or skip it (--skip-unreadable)"


class InputLostError(InputError):
    """Input the broker's log no longer holds, where the processor is to read next."""

    exit_status = 4
    what_to_do = "go on from what the log holds (--on-lost-input continue), or start over"


class StateError(StreamcalError):
    """A checkpoint or a state store that cannot be trusted, read or written."""

    exit_status = 2
    what_to_do = "give the checkpoint key it was written with, or another --state-dir"


class BrokerError(StreamcalError):
    """The Kafka side failed: a broker out of reach, a client's error, an aborted
    transaction. No checkpoint is written after it."""

    exit_status = 1
    what_to_do = "check that the brokers answer; a restart resumes from the last checkpoint"
    client_words = True  # the message is a Kafka client's: shown with its type


class SupersededError(StreamcalError):
    """Another instance took this one's work over (exactly-once: one transactional id)."""

    exit_status = 5
    what_to_do = "leave the successor running, or stop it before starting this one again"


BRANCHES = (ConfigurationError, DependencyError, InputError, InputLostError, StateError,
            BrokerError, SupersededError)  # fmt: skip


def pre_release(what: str) -> str:
    """The one line refusing ``what``: a form of state that only development versions
    wrote before the first release, which no user holds, so it is refused, not migrated.

    >>> pre_release("a rank store state of format 1")  # doctest: +ELLIPSIS
    'a rank store state of format 1, written by a development version of streamcal ...'
    """
    return (f"{what}, written by a development version of streamcal before the first "
            "release, which this one does not read")
