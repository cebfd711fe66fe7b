"""The criteria are data rows (conformance/criteria/*.yaml): every row is read and checked."""

from __future__ import annotations

import pickle
from dataclasses import asdict
from typing import Any

import pytest

from conformance.catalogue import (
    AREAS,
    CATALOGUE,
    DIALECTS,
    CatalogueError,
    _criterion,
    by_id,
)
from conformance.errors import ConformanceError


def _row(**over: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": "RTY-99",
        "level": "MUST",
        "title": "A title",
        "text": "A text.",
        "source": "seed 000",
    }
    row.update(over)
    return {k: v for k, v in row.items() if v is not None}


def test_every_area_has_its_file_and_rows_in_order() -> None:
    assert list(AREAS) == list(dict.fromkeys(c.area for c in CATALOGUE))
    assert all(name for name in AREAS.values())
    ids = [c.id for c in CATALOGUE]
    assert len(ids) == len(set(ids))


def test_a_good_row_reads_with_defaults() -> None:
    c, numbers = _criterion("RTY", _row(numbers={"retries": 3}), "here")
    assert (c.id, c.area, c.capability, c.dialects, dict(numbers)) == (
        "RTY-99",
        "RTY",
        None,
        DIALECTS,
        {"retries": 3},
    )
    assert dict(c.numbers) == {}  # only the catalogue's own rows have numbers by id


@pytest.mark.parametrize(
    ("over", "says"),
    [
        ({"id": "STR-01"}, "is not RTY-NN"),
        ({"id": "RTY-1"}, "is not RTY-NN"),
        ({"level": "COULD"}, "level 'COULD'"),
        ({"title": ""}, "missing or empty text field(s) ['title']"),
        ({"colour": "red"}, "unknown field(s) ['colour']"),
        ({"level": "MAY"}, "a MAY criterion needs a capability"),
        ({"capability": 3}, "capability 3"),
        ({"dialects": ["openai_chat", "openai_chat"]}, "dialects"),
        ({"dialects": ["smoke_signals"]}, "dialects"),
        ({"dialects": []}, "dialects"),
        ({"numbers": {"retries": "ten"}}, "numbers"),
        ({"numbers": {"retries": True}}, "numbers"),
        ({"numbers": [10]}, "numbers"),
    ],
)
def test_a_bad_row_is_refused_naming_where_and_what(over: dict[str, Any], says: str) -> None:
    with pytest.raises(CatalogueError, match="^rty.yaml, row 9: ") as err:
        _criterion("RTY", _row(**over), "rty.yaml, row 9")
    assert says in str(err.value)
    assert isinstance(err.value, ConformanceError) and isinstance(err.value, ValueError)


def test_a_row_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(CatalogueError, match="a row is a mapping of fields, not list"):
        _criterion("RTY", ["RTY-99"], "rty.yaml, row 1")


def test_numbers_are_read_only_and_not_in_the_results_fields() -> None:
    c = by_id("RTY-04")
    with pytest.raises(TypeError):
        c.numbers["retries"] = 11  # type: ignore[index]
    # The results document carries a criterion's fields: the same as before the numbers came,
    # and whether it is beyond the seeds.
    assert list(asdict(c)) == [
        "id",
        "level",
        "area",
        "title",
        "text",
        "source",
        "capability",
        "dialects",
        "beyond_seeds",  # shown with the criterion: where a criterion not in the seeds is from
        "config_keys",  # the scenario config its check judges against: an agent must be told
    ]
    assert pickle.loads(pickle.dumps(c)) == c and hash(c) == hash(by_id("RTY-04"))


def test_the_numbers_the_checks_read() -> None:
    # The checks take these from the rows (conformance/checks/*.py); the texts say them in words.
    assert dict(by_id("RTY-03").numbers) == {
        "base_s": 0.5,
        "cap_s": 32,
        "jitter_low": 0.75,
        "jitter_high": 1.25,
    }
    assert dict(by_id("RTY-04").numbers) == {"retries": 10}
    assert dict(by_id("RTY-14").numbers) == {"max_wait_s": 300}
    assert "up to 10 times" in by_id("RTY-04").text
    assert dict(by_id("TRN-04").numbers) == {"recoveries": 3}
    assert dict(by_id("LOP-05").numbers) == {"failures": 3}
    assert dict(by_id("LOP-06").numbers) == {"repeats": 3}
    assert dict(by_id("FMT-01").numbers) == {"over_chars": 30000, "over_lines": 2000}
    assert dict(by_id("FMT-03").numbers) == {"short_lines": 100}


def test_the_checks_use_the_rows_numbers() -> None:
    from conformance.checks import fmt, lop, rty, rty_cases, str_, trn
    from conformance.judging import deadlines
    from conformance.judging.evidence import nominal_backoff

    assert (rty.MAX_RETRIES, rty.JITTER_LOW, rty.JITTER_HIGH) == (10, 0.75, 1.25)
    assert (deadlines.MAX_RETRIES, deadlines.JITTER_LOW, deadlines.JITTER_HIGH) == (10, 0.75, 1.25)
    assert rty_cases.EXCESSIVE_WAIT_S == deadlines.EXCESSIVE_WAIT_S == 300.0
    assert str_.ATTEMPTS_PER_MODE == 11 and str_.MAX_EMPTY == 22
    assert trn.MAX_RECOVERIES == 3
    assert (lop.COMPACTION_BREAKER, lop.TEXT_REPEATS) == (3, 3)
    assert (fmt.OVER_CHARS, fmt.OVER_LINES, fmt.SHORT_LINES) == (30000, 2000, 100)
    assert [nominal_backoff(n) for n in (1, 2, 7, 8, 11)] == [0.5, 1.0, 32.0, 32.0, 32.0]
