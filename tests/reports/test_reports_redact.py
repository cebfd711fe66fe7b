"""Redactor: given secrets, bearer tokens and secret header values are masked."""

from __future__ import annotations

from reports.redact import MASK, Redactor


def test_text_masks_secret_bearer_and_header_lines():
    r = Redactor(["s3cr3t-value"])
    out = r.text(
        "key s3cr3t-value\nAuthorization: Basic abc123\nx-api-key: zzz\nuse Bearer tok.en-1"
    )
    assert "s3cr3t-value" not in out and "abc123" not in out and "zzz" not in out
    assert "tok.en-1" not in out
    assert out.count(MASK) == 4


def test_deep_masks_header_maps_case_insensitively_and_keeps_shape():
    r = Redactor()
    doc = {"headers": {"Authorization": "Basic q", "X-API-Key": "k", "accept": "a"}, "n": [1, None]}
    out = r.deep(doc)
    assert out == {
        "headers": {"Authorization": MASK, "X-API-Key": MASK, "accept": "a"},
        "n": [1, None],
    }
    assert doc["headers"]["Authorization"] == "Basic q"  # input untouched


def test_longer_secret_removed_whole():
    r = Redactor(["abc", "abcdef"])
    assert r.text("xabcdefx") == f"x{MASK}x"
