"""The certificate bundle: one zip file a vendor publishes and a reader checks.

It holds ``results.json`` (the results document: every scenario's evidence with its sha256, the
verdicts, the catalogue release and the digest of its rules, the run's timing allowances) and
``manifest.json``, which names what the bundle certifies (the agents with their versions, the
catalogue release, the repeats it rests on) and carries the sha256 of ``results.json``.
``conformance rejudge BUNDLE`` checks the digest, then derives every verdict again.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["MANIFEST", "RESULTS", "manifest", "write_bundle"]

RESULTS = "results.json"
MANIFEST = "manifest.json"


def manifest(doc: Mapping[str, Any], results_sha256: str) -> dict[str, Any]:
    run = doc.get("run") or {}
    return {
        "format": "conformance-certificate",
        "version": 1,
        "results_sha256": results_sha256,
        "catalogue_version": run.get("catalogue_version"),
        "catalogue_sha256": run.get("catalogue_sha256"),
        "harness_version": run.get("harness_version"),
        "run": {k: run.get(k) for k in ("started", "finished", "command", "dialect")}
        | {"tool_transport": run.get("tool_transport"), "timing": run.get("timing")},
        "repeats": int(run.get("repeat") or 1),
        "agents": [
            {
                "name": a.get("name"),
                "adapter": a.get("adapter"),
                "version": a.get("version"),
                "capabilities": a.get("capabilities"),
                "verdicts": {cid: c.get("verdict") for cid, c in (a.get("criteria") or {}).items()},
            }
            for a in doc.get("agents") or []
        ],
    }


def write_bundle(doc: Mapping[str, Any], path: Path) -> Path:
    """Write ``doc`` as a certificate bundle at ``path`` (atomically: a reader never sees half)."""
    raw = json.dumps(doc, ensure_ascii=False, indent=1).encode("utf-8")
    digest = hashlib.sha256(raw).hexdigest()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as z:
        z.writestr(RESULTS, raw)
        z.writestr(MANIFEST, json.dumps(manifest(doc, digest), ensure_ascii=False, indent=1))
    tmp.replace(path)
    return path
