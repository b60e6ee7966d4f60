from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_opprof import __version__
from pytest_opprof.cli import main


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"opprof {__version__}"


def test_no_arguments_prints_help(capsys):
    assert main([]) == 0
    assert "usage: opprof" in capsys.readouterr().out


def test_the_console_script_is_installed():
    out = subprocess.run([sys.executable, "-m", "pytest_opprof.cli", "--version"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"opprof {__version__}"


def test_unknown_arguments_exit_non_zero(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--bogus"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err
