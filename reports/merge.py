"""Shards of one run merged back into the results document the whole run would have written.

Theory of operation: ``conformance run --shard K/N`` runs the K-th of N parts of a scenario
selection and marks its results with ``run.shard`` (``index``, ``count``, and ``selection``, a
digest of the selected scenario ids, so that parts of different selections are never mixed).
Documents whose ``run.shard`` agree on the count, the selection, the dialect, the tool transport
and the agents' names are parts of one run; each such group becomes one document. An agent's scenarios are the
union of its parts' (in file order), and each criterion's verdict is computed again from all the
scenario verdicts that cite it, the worst in the results contract's order, as one process running
every scenario computes it. A criterion exercised in several shards is thus judged exactly as in
an unsharded run. The merged run records which parts it holds (``run.shards``); a missing part
is shown by the report, never filled in. Parts judged by different catalogue releases
(``run.catalogue_version``) are refused. Documents without ``run.shard`` pass through unchanged.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

from reports.errors import ResultsError
from reports.verdicts import worst

__all__ = ["merge_shards", "missing_shards"]

_SHARD_WORD = re.compile(r"\s--shard(?:=|\s+)\S+")


def _key(doc: dict[str, Any]) -> tuple[Any, ...]:
    shard, run = doc["run"]["shard"], doc["run"]
    names = tuple(a["name"] for a in doc["agents"])
    transport = run.get("tool_transport") or "http"
    return (shard["count"], shard.get("selection"), run.get("dialect"), transport, names)


def _order(scenario: dict[str, Any]) -> tuple[str, str]:
    return (scenario.get("file") or "", scenario["id"])


def _merge_agent(parts: list[dict[str, Any]]) -> dict[str, Any]:
    first = parts[0]
    scenarios = sorted((s for a in parts for s in a["scenarios"]), key=_order)
    place = {s["id"]: i for i, s in enumerate(scenarios)}
    cited: dict[str, list[dict[str, Any]]] = {}
    for a in parts:
        for cid, res in a["criteria"].items():
            cited.setdefault(cid, []).extend(res["scenarios"])
    criteria = {}
    for cid in sorted(cited):
        found = sorted(cited[cid], key=lambda s: place.get(s["id"], len(place)))
        criteria[cid] = {"verdict": worst([s["verdict"] for s in found]), "scenarios": found}
    caps = sorted({c for a in parts for c in a.get("capabilities") or []})
    version = next((a.get("version") for a in parts if a.get("version")), None)
    return {**first, "version": version, "capabilities": caps, "criteria": criteria,
            "scenarios": scenarios}  # fmt: skip


def _merge_group(docs: list[dict[str, Any]]) -> dict[str, Any]:
    docs = sorted(docs, key=lambda d: d["run"]["shard"]["index"])
    runs = [d["run"] for d in docs]
    first = runs[0]
    finished = [r.get("finished") for r in runs]
    scales = {r.get("time_scale") for r in runs}
    run = {k: v for k, v in first.items() if k != "shard"}
    run.update(
        started=min(r["started"] for r in runs),
        finished=None if None in finished else max(f for f in finished if f),
        time_scale=scales.pop() if len(scales) == 1 else None,
        interrupted=any(r.get("interrupted") for r in runs),
        command=_SHARD_WORD.sub("", first.get("command") or "") or None,
        shards={
            "count": first["shard"]["count"],
            "present": [r["shard"]["index"] for r in runs],
            "selection": first["shard"].get("selection"),
        },
    )
    catalogue: dict[str, dict[str, Any]] = {}
    for d in docs:
        for c in d["catalogue"]:
            catalogue.setdefault(c["id"], c)
    agents = [_merge_agent([d["agents"][i] for d in docs]) for i in range(len(docs[0]["agents"]))]
    return {**docs[0], "run": run, "catalogue": list(catalogue.values()), "agents": agents}


def merge_shards(
    results: Sequence[dict[str, Any]], sources: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """Merge the shards among validated results documents (see the module's docstring); keep
    every other document as it is, in the order given (a merged run where its first part was).

    Raises ResultsError, naming the documents (``sources``, default ``results[i]``), when two
    documents are the same part of one run.
    """
    names = list(sources) if sources is not None else [f"results[{i}]" for i in range(len(results))]
    groups: dict[tuple[Any, ...], list[int]] = {}
    out: list[Any] = []
    for i, doc in enumerate(results):
        if not doc["run"].get("shard"):
            out.append(doc)
            continue
        key = _key(doc)
        if key not in groups:
            groups[key] = []
            out.append(key)
        index = doc["run"]["shard"]["index"]
        for j in groups[key]:
            if results[j]["run"]["shard"]["index"] == index:
                raise ResultsError(
                    f"{names[i]}: shard {index}/{key[0]} of the same run as {names[j]}: "
                    "give each shard's results once"
                )
        if index > key[0]:
            raise ResultsError(f"{names[i]}: at $.run.shard: index {index} > count {key[0]}")
        groups[key].append(i)
    for members in groups.values():
        _same_rules([results[i] for i in members], [names[i] for i in members])
    return [
        _merge_group([copy.deepcopy(results[i]) for i in groups[item]])
        if isinstance(item, tuple)
        else item
        for item in out
    ]


def _same_rules(docs: list[dict[str, Any]], names: list[str]) -> None:
    """Parts judged by different catalogue releases are not one run's verdicts: refuse them."""
    seen: dict[Any, str] = {}
    for doc, name in zip(docs, names, strict=True):
        version = doc["run"].get("catalogue_version")
        seen.setdefault(version, name)
    if len(seen) > 1:
        shown = "; ".join(
            f"{name}: catalogue {v if v else '(none: written before releases)'}"
            for v, name in seen.items()
        )
        raise ResultsError(
            f"the shards were judged by different catalogue releases ({shown}): their verdicts "
            "cannot be merged; rerun the shards on one release, or re-judge each "
            "(`conformance rejudge RESULTS --out FILE`) with the installed one"
        )


def missing_shards(run: dict[str, Any]) -> list[int]:
    """The parts a merged run lacks (1-based), or those a single shard's document leaves out."""
    merged = run.get("shards")
    if merged:
        return [k for k in range(1, merged["count"] + 1) if k not in merged["present"]]
    shard = run.get("shard")
    if shard:
        return [k for k in range(1, shard["count"] + 1) if k != shard["index"]]
    return []
