"""The errors' tree (``streamcal.errors``): every exception class streamcal defines derives
from ``StreamcalError`` and keeps the builtin base its callers catch; the command line
ends each with its branch's exit status and one line, in one place."""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil

import pytest

import streamcal
from streamcal import cli, errors


def defined_exceptions() -> dict[str, type]:
    """Every exception class defined in a module of streamcal, by qualified name (the
    modules are walked, so a new one is found without being listed here)."""
    found = {}
    for info in pkgutil.walk_packages(streamcal.__path__, "streamcal."):
        if info.name.endswith("__main__"):  # runs the command line
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError as exc:  # an optional package missing (CI's run without numba):
            if (exc.name or "").startswith("streamcal"):  # the run with it walks these
                raise
            continue
        for obj in vars(module).values():
            if (inspect.isclass(obj) and issubclass(obj, BaseException)
                    and obj.__module__ == module.__name__):  # fmt: skip
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


EXCEPTIONS = defined_exceptions()
WARNINGS = {name for name, cls in EXCEPTIONS.items() if issubclass(cls, Warning)}


def test_the_walk_finds_the_errors_and_the_warnings():
    names = {name.rsplit(".", 1)[1] for name in EXCEPTIONS}
    assert {"BadInput", "LostInput", "KafkaTimeout", "_Broken", "MissingDependencyError",
            "UsageError", "StreamcalError", "InputLostError"} <= names  # fmt: skip
    assert {"UnlearnedWarning", "CategoryChurnWarning", "StoreBackendWarning"} <= {
        name.rsplit(".", 1)[1] for name in WARNINGS
    }


@pytest.mark.parametrize("name", sorted(set(EXCEPTIONS) - WARNINGS))
def test_every_error_defined_in_streamcal_derives_from_streamcal_error(name):
    assert issubclass(EXCEPTIONS[name], errors.StreamcalError)


@pytest.mark.parametrize("name", sorted(WARNINGS))
def test_warnings_keep_their_own_classes(name):
    assert not issubclass(EXCEPTIONS[name], errors.StreamcalError)


# The builtin each error was before the tree: callers catch them so, and still may.
BUILTIN = {
    "streamcal.core.validate.NonFiniteScore": ValueError,
    "streamcal.demo.broker.BrokerError": RuntimeError,
    "streamcal.monitoring.report.figures.MissingDependencyError": ImportError,
    "streamcal.stream.kafka.group.GroupError": RuntimeError,
    "streamcal.stream.kafka.lost.LostInput": RuntimeError,
    "streamcal.stream.kafka.lost.UnreadableBatch": RuntimeError,
    "streamcal.stream.kafka.port.KafkaError": RuntimeError,
    "streamcal.stream.kafka.preflight.SetupError": ValueError,
    "streamcal.stream.kafka.sink.Fenced": RuntimeError,
    "streamcal.stream.kafka.sink.TransactionAborted": RuntimeError,
    "streamcal.stream.messages.BadInput": ValueError,
    "streamcal.stream.pending.TamperedEntry": ValueError,
    "streamcal.stream.state.errors.StoreError": OSError,
}


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_errors_keep_the_builtin_base_their_callers_catch(name):
    assert issubclass(EXCEPTIONS[name], BUILTIN[name])


def test_the_branches_and_their_exit_statuses_are_public():
    for branch in (errors.StreamcalError, *errors.BRANCHES):
        assert getattr(streamcal, branch.__name__) is branch
        assert branch.what_to_do and branch.exit_status in range(1, 6)


# ---------------------------------------------------------------- the command line
def _ends(monkeypatch, capsys, exc) -> tuple[int, str]:
    """The exit status and stderr of ``streamcal x``, a command that raises ``exc``."""

    def build_parser():
        parser = argparse.ArgumentParser(prog="streamcal")
        sub = parser.add_subparsers(dest="command")
        sub.add_parser("x").set_defaults(func=lambda args: (_ for _ in ()).throw(exc))
        return parser

    monkeypatch.setattr(cli, "build_parser", build_parser)
    status = cli.main(["x"])
    return status, capsys.readouterr().err


def _todo(exc, command: str = "x") -> str:
    """The what-to-do line of ``exc``'s branch, as ``streamcal COMMAND`` prints it."""
    todo = exc.what_to_do.replace("streamcal COMMAND", f"streamcal {command}")
    assert "COMMAND" not in todo
    return f"  what to do: {todo}\n"


@pytest.mark.parametrize("branch", errors.BRANCHES, ids=lambda b: b.__name__)
def test_the_command_line_ends_each_branch_with_its_status_and_one_line(branch, monkeypatch,
                                                                        capsys):  # fmt: skip
    status, err = _ends(monkeypatch, capsys, branch("what went wrong"))
    assert status == branch.exit_status
    shown = repr(branch("what went wrong")) if branch is errors.BrokerError else "what went wrong"
    assert err == f"streamcal x: error: {shown}\n{_todo(branch)}"


def test_the_statuses_differ_where_the_fix_differs():
    statuses = {b.__name__: b.exit_status for b in errors.BRANCHES}
    assert statuses == {"ConfigurationError": 2, "DependencyError": 2, "InputError": 3,
                        "InputLostError": 4, "StateError": 2, "BrokerError": 1,
                        "SupersededError": 5}  # fmt: skip


def _leaves():
    """One instance of each error that `streamcal run` ended with before the tree, with the
    status and the line it ended with (cli/run.py's eight clauses)."""
    from streamcal.stream.kafka.group import GroupError
    from streamcal.stream.kafka.ordering import LostInput, UnreadableBatch
    from streamcal.stream.kafka.port import KafkaTimeout
    from streamcal.stream.kafka.preflight import SetupError
    from streamcal.stream.kafka.sink import Fenced, TransactionAborted
    from streamcal.stream.state.errors import CheckpointError, DamagedStore, StoreError

    unreadable = UnreadableBatch("ev", 0, 5, 9, ValueError("crc"), "install the codec")
    lost = LostInput("ev", 1, 40, 50, 60, 50, "the log holds 50..59")
    timeout = KafkaTimeout("no answer")
    aborted = TransactionAborted("send failed")
    return [
        (GroupError("co-partitioned"), 2, "co-partitioned"),
        (CheckpointError("bad tag"), 2, "bad tag"),
        (SetupError("TLS"), 2, "TLS"),
        (DamagedStore("opened empty"), 2, "opened empty"),
        (unreadable, 3, str(unreadable)),
        (StoreError("disk full"), 1, "disk full"),
        (lost, 4, str(lost)),
        (Fenced("fenced: another producer"), 5, "fenced: another producer"),
        (timeout, 1, "KafkaTimeout('no answer')"),
        (aborted, 1, "TransactionAborted('send failed')"),
    ]


@pytest.mark.parametrize("case", range(10))
def test_what_run_ended_with_before_the_tree_it_still_ends_with(case, monkeypatch, capsys):
    exc, want_status, want_line = _leaves()[case]
    status, err = _ends(monkeypatch, capsys, exc)
    assert (status, err) == (want_status, f"streamcal x: error: {want_line}\n{_todo(exc)}")


@pytest.mark.parametrize(
    "raised, status, line",
    [
        (RuntimeError("port taken"), 1, "RuntimeError('port taken')"),
        (OSError("no route"), 1, "OSError('no route')"),
    ],
)
def test_run_ends_a_failure_from_outside_streamcal_with_status_1_and_its_type(
    raised, status, line, monkeypatch, capsys, tmp_path
):
    from streamcal.stream.processor import Processor

    def run(self, **kwargs):
        raise raised

    monkeypatch.setattr(Processor, "run", run)
    argv = ["run", "--bootstrap-servers", "127.0.0.1:1", "--metrics-file", "none",
            "--state-topic", "none"]  # fmt: skip
    assert cli.main(argv) == status
    todo = _todo(errors.StreamcalError, "run")
    assert capsys.readouterr().err == f"streamcal run: error: {line}\n{todo}"


def test_the_help_lists_each_branchs_status_and_what_to_do():
    text = cli.build_parser().format_help()
    for branch in errors.BRANCHES:
        assert f"  {branch.exit_status}  {branch.__name__}: {branch.what_to_do}\n" in text
