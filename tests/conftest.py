"""Every test's runs keep what they cache (conformance.cache: scenario durations, clock
calibrations) in a folder of their own: a run of one test never orders or calibrates the next
one's, nor touches the user's cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.cache import ENV


@pytest.fixture(autouse=True)
def _own_durations(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    folder: Path = tmp_path_factory.mktemp("durations")
    monkeypatch.setenv(ENV, str(folder))
    yield folder
