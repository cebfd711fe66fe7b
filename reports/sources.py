"""A criterion's source in words a reader without the seeds understands.

Theory of operation: the catalogue names where a criterion comes from as ``seed 000, 速率限制弹性,
scenario 1; seed 002, retry semantics``: a seed by number, then a section by its original
(Chinese) title, its number (``§7.3``) or our own English words, then what in it. ``sources.json``
holds each seed's English name and what kind of document it is, and an English title for each
section the catalogue cites. :func:`describe` turns a source into parts the template writes with
the English first and the original title beside it in a ``lang="zh"`` span (a font stack that
reaches a CJK font where one is installed); a source that names no seed is kept as written.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

__all__ = ["describe", "plain", "unknown_sections"]

_SEED = re.compile(r"^seeds?\s+(\d{3})(?:\s*,\s*(.*))?$", re.S)
_CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")


@cache
def _data() -> dict[str, Any]:
    text = resources.files("reports").joinpath("sources.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)  # a JSON object, shipped with the package
    return data


def _section(seed: str, head: str) -> tuple[str | None, str | None, str]:
    """(English title, original title, what is left) of a section named by ``head``."""
    sections = _data()["sections"].get(seed, {})
    # "流式响应…重发 (abort)": the title, then our note on which part of it.
    title, note = head, ""
    m = re.match(r"^(.*?)\s*(\([^()]*\))$", head)
    if m and (m.group(1) in sections):
        title, note = m.group(1), m.group(2)
    got = sections.get(title)
    if isinstance(got, list):  # "§7.3": [English, original]
        return f"{title} {got[0]}", got[1], note
    if isinstance(got, str):
        return got, title, note
    return None, None, head


def describe(source: str | None) -> list[dict[str, Any]]:
    """The parts of ``source`` (``;``-separated), each ``{"text"}`` for a source that names no
    seed, or ``{"seed", "name", "what", "original", "section", "section_original", "rest"}``."""
    parts: list[dict[str, Any]] = []
    for raw in (source or "").split(";"):
        raw = " ".join(raw.split())
        if not raw:
            continue
        m = _SEED.match(raw)
        seed = m and _data()["seeds"].get(m.group(1))
        if not m or not seed:
            parts.append({"text": raw})
            continue
        words = [w.strip() for w in (m.group(2) or "").split(",") if w.strip()]
        section = section_original = None
        rest = words
        if words:
            en, original, note = _section(m.group(1), words[0])
            if en is not None:
                section, section_original = en, original
                rest = ([note] if note else []) + words[1:]
        parts.append(
            {
                "seed": m.group(1),
                "name": seed["name"],
                "what": seed["what"],
                "original": seed["original"],
                "section": section,
                "section_original": section_original,
                "rest": ", ".join(rest),
            }
        )
    return parts


def plain(source: str | None) -> str:
    """``source`` in English only (for text outputs, and for tests)."""
    out = []
    for p in describe(source):
        if "text" in p:
            out.append(p["text"])
            continue
        words = f"{p['name']} (seed {p['seed']})"
        if p["section"]:
            words += f", section “{p['section']}”"
        if p["rest"]:
            words += f", {p['rest']}"
        out.append(words)
    return "; ".join(out)


def unknown_sections(source: str | None) -> list[str]:
    """The parts of ``source`` that still carry CJK text with no English title (none, when
    ``sources.json`` covers the catalogue)."""
    out = []
    for p in describe(source):
        leftover = p.get("text") or p.get("rest") or ""
        if _CJK.search(leftover):
            out.append(leftover)
    return out
