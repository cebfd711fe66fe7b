from __future__ import annotations

from pathlib import Path

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


def test_report_renders_saved_results(tmp_path):
    sample = Path(__file__).parent / "reports" / "sample_results.json"
    out = tmp_path / "out"
    assert main(["report", str(sample), "--out", str(out)]) == 0
    assert (out / "index.html").is_file()
    assert (out / "junit.xml").is_file()


def test_report_bad_input_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    assert main(["report", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "bad.json" in capsys.readouterr().err
