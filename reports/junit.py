"""JUnit XML: one testcase per criterion x scenario x agent.

FAIL is a failure, ERROR and TIMEOUT are errors, UNSUPPORTED is skipped, NON-STRICT and
INFORMATIONAL pass with a ``system-out`` note. One testsuite per agent.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

from reports.model import build_report, junit_classname
from reports.redact import Redactor

__all__ = ["render_junit"]


def _cases(report: Any, agent: Any) -> list[tuple[str, str, str, dict[str, Any]]]:
    out = []
    for c in report.catalogue:
        res = agent.data["criteria"].get(c["id"])
        if not res:
            continue
        scen = res["scenarios"] or [{"id": "-", "verdict": res["verdict"]}]
        for s in scen:
            out.append((c["id"], c["area"], s["id"], {**s, "title": c["title"]}))
    return out


def render_junit(results: Sequence[dict[str, Any]], *, secrets: Sequence[str] = ()) -> str:
    """Return the JUnit XML text for validated results documents."""
    red = Redactor(secrets)
    results = [red.deep(d) for d in results]
    report = build_report(results)
    root = ET.Element("testsuites", name="conformance")
    grand = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for agent in report.agents:
        suite = ET.SubElement(root, "testsuite", name=agent.name)
        # Which rules judged these verdicts (the catalogue's release and the digest of its rules).
        props = ET.SubElement(suite, "properties")
        for key in ("catalogue_version", "catalogue_sha256", "harness_version", "repeat"):
            value = agent.run.get(key)
            if value is not None:
                ET.SubElement(props, "property", name=key, value=str(value))
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        total_time = 0.0
        for cid, area, sid, s in _cases(report, agent):
            sc = agent.scenarios.get(sid, {})
            dur = float(sc.get("duration_s") or 0.0)
            total_time += dur
            case = ET.SubElement(
                suite,
                "testcase",
                classname=junit_classname(agent, area),
                name=f"{cid} {sid}",
                time=f"{dur:.3f}",
            )
            counts["tests"] += 1
            v = s["verdict"]
            detail = red.text(
                f"{s['title']}\nexpected: {s.get('expected') or ''}\n"
                f"observed: {s.get('observed') or ''}"
            )
            if v in ("FAIL", "UNSTABLE"):  # UNSTABLE: runs of --repeat disagreed, a failure too
                counts["failures"] += 1
                ET.SubElement(case, "failure", message=f"{cid} {v}", type=v).text = detail
            elif v in ("ERROR", "TIMEOUT"):
                counts["errors"] += 1
                msg = red.text(sc.get("error") or v)
                ET.SubElement(case, "error", message=msg, type=v).text = detail
            elif v == "UNSUPPORTED":
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=f"{cid} UNSUPPORTED")
            elif v in ("NON-STRICT", "INFORMATIONAL"):
                ET.SubElement(case, "system-out").text = f"{v}: {detail}"
        for k, n in counts.items():
            suite.set(k, str(n))
            grand[k] += n
        suite.set("time", f"{total_time:.3f}")
    for k, n in grand.items():
        root.set(k, str(n))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
