"""``main`` in-process for what fails before any connection: usage errors are one line, exit 2."""

from __future__ import annotations

import pytest

from pyspark_log import __version__
from pyspark_log.cli import main
from pyspark_log.cli.app import build_parser


def fail_line(capsys: pytest.CaptureFixture[str], argv: list[str], code: int = 2) -> str:
    assert main(argv) == code
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith("pylog: ")
    return err.rstrip("\n")


USAGE_ERRORS = [
    ([], "the following arguments are required: COMMAND (see 'pylog --help')"),
    (["topics"], "the following arguments are required: VERB (see 'pylog topics --help')"),
    (["topics", "alter", "t"], "topics alter needs --partitions, --config or --delete-config"),
    (["topics", "alter", "t", "--config", "a=1", "--delete-config", "a"], "config 'a' is both set and deleted"),
    (["topics", "create", "t", "--config", "oops"], "config 'oops' must look like key=value"),
    (["topics", "create", "t", "--partitions", "0"], "argument --partitions: must be >= 1, not 0 (see 'pylog topics"),
    (["consume", "t", "--offset", "-1"], "argument --offset: must be >= 0, not -1 (see 'pylog consume --help')"),
    (["consume", "t", "--from-timestamp", "soon"], "timestamp 'soon' is neither milliseconds nor ISO 8601"),
    (["offsets", "t", "--time", "later"], "time must be earliest, latest, max-timestamp, epoch ms or ISO 8601, not"),
    (["produce", "t", "--acks", "2"], "argument --acks: invalid choice: '2' (choose from '0', '1', 'all', '-1')"),
    (["produce", "t", "--file", "/no/such/file"], "cannot open '/no/such/file': No such file or directory"),
    (["--command-config", "/no/such.conf", "topics", "list"], "cannot read command config '/no/such.conf': No such"),
]


@pytest.mark.parametrize(("argv", "expected"), USAGE_ERRORS)
def test_usage_errors(capsys: pytest.CaptureFixture[str], argv: list[str], expected: str) -> None:
    assert fail_line(capsys, argv).startswith("pylog: " + expected)


def test_common_options_go_before_or_after_the_command() -> None:
    parser = build_parser()
    before = parser.parse_args(["--bootstrap-server", "h:1", "--output", "json", "topics", "list"])
    after = parser.parse_args(["topics", "list", "--bootstrap-server", "h:1", "--output", "json"])
    for args in (before, after):
        assert (args.bootstrap_server, args.output, args.debug) == ("h:1", "json", False)
    assert parser.parse_args(["topics", "list"]).bootstrap_server is None


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"pylog {__version__}\n"
