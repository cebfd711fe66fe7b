from __future__ import annotations

import pytest

from conformance import __version__
from conformance.cli import main


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert __version__ in capsys.readouterr().out


def test_help_names_the_commands(capsys):
    assert main([]) == 0
    assert "list" in capsys.readouterr().out
