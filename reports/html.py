"""HTML pages: ``index.html``, ``criteria/<ID>.html`` and ``scenarios/<agent>/<scenario>.html``
rendered with autoescaping jinja2, and each scenario's whole evidence beside them.

Theory of operation: data is redacted before it reaches the templates, and the environment's
``finalize`` hook redacts every printed value again (covers strings built here, such as pretty
JSON); the ``body`` filter does the same for the bodies it escapes. Agent-controlled text only
ever appears as escaped element text, never in attributes that load or run anything; file names
and ids are made of sanitised names (``reports.views.slug`` / ``anchor``).

A scenario's evidence is on its own page once (``reports.views.scenario_page``), its bytes whole
in ``evidence/`` (``reports.evidence``); a criterion page lists the scenarios that judged it and
links to them, so a criterion judged on every scenario is a list, not every scenario's evidence.
"""

from __future__ import annotations

import html
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from reports.evidence import human_bytes, write_evidence
from reports.model import VERDICTS, AgentView, Report
from reports.pictures import matrix
from reports.redact import Redactor
from reports.sources import describe
from reports.units import scenario_from_real
from reports.views import Paths, anchor, criterion_agents, scenario_page, slug

__all__ = ["environment", "render_html"]


def environment(redactor: Redactor) -> jinja2.Environment:
    """The template environment: package templates, autoescape always on, redacting finalize."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"),
        autoescape=True,
        finalize=redactor,
        undefined=jinja2.StrictUndefined,
    )

    def body(value: Any) -> Markup:
        # Element text needs only & < > escaped; quotes, which fill JSON, stay one byte each.
        return Markup(html.escape(redactor.text(str(value)), quote=False))

    env.filters["body"] = body
    env.filters["bytes"] = human_bytes
    return env


def _common(report: Report) -> dict[str, Any]:
    return {
        "interrupted": report.interrupted,
        "incomplete": report.incomplete(),
        "agents": report.agents,
        "runs": report.runs,
    }


def _timing(run: dict[str, Any]) -> dict[str, str] | None:
    t = run.get("timing")
    if not t:
        return None
    scale = run.get("time_scale")
    return {
        "late": scenario_from_real(float(t["late_slack_s"]), scale),
        "early": scenario_from_real(float(t["early_slack_s"]), scale),
        "noise": scenario_from_real(float(t["noise_s"]), scale),
        "processes": str(len(t.get("calibrations") or [])),
    }


def catalogue_versions(runs: list[dict[str, Any]]) -> list[str]:
    """The catalogue releases that judged ``runs``, in order ("(before releases)" for none)."""
    seen = [str(r.get("catalogue_version") or "(before releases)") for r in runs]
    return list(dict.fromkeys(seen))


def _reactions(agents: list[AgentView]) -> list[dict[str, str]]:
    """Each agent's own reaction, as the run measured it before its scenarios (the first
    scenario entry that carries it), beside the machine's allowances."""
    out = []
    for a in agents:
        r = next((s["reaction"] for s in a.scenarios.values() if s.get("reaction")), None)
        if r:
            scale = r.get("timing_scale")
            out.append(
                {
                    "agent": a.name,
                    "median": f"{r.get('median_ms', 0):.1f} ms",
                    "spread": f"{r.get('spread_ms', 0):.1f} ms",
                    "scale": f"timing scenarios at time scale {scale:g}" if scale else "",
                }
            )
    return out


def _paths(agents: list[AgentView]) -> dict[str, dict[str, Paths]]:
    """Per agent name, per scenario id, where its page and evidence file go."""
    out: dict[str, dict[str, Paths]] = {}
    used: set[str] = set()
    for a in agents:
        d = slug(a.name)
        while d in used:  # names are unique; their slugs almost surely, and now surely
            d += "_"
        used.add(d)
        out[a.name] = {sid: Paths(d, slug(sid)) for sid in a.scenarios}
    return out


def render_html(report: Report, out_dir: Path, redactor: Redactor) -> Path:
    """Write index.html, a page per catalogue criterion and a page and evidence file per
    scenario of each agent into ``out_dir``."""
    env = environment(redactor)
    common = _common(report)
    paths = _paths(report.agents)
    index = out_dir / "index.html"
    # One stylesheet and one script (the font check) for every page, beside them: files of the
    # report, not outside resources.
    for name in ("report.css", "report.js"):
        text = env.loader.get_source(env, name)[0] if env.loader else ""
        (out_dir / name).write_text(text, encoding="utf-8")
    index.write_text(
        env.get_template("index.html.j2").render(
            **common,
            verdicts=VERDICTS,
            totals=report.totals(),
            must_unsupported={a.name: report.must_unsupported(a) for a in report.agents},
            must_unjudged={a.name: report.must_unjudged(a) for a in report.agents},
            must_unsettled={a.name: report.must_unsettled(a) for a in report.agents},
            areas=report.areas(),
            matrix=matrix(report, anchor),
            timing=[_timing(r) for r in report.runs],
            reactions=_reactions(report.agents),
            catalogue_versions=catalogue_versions(report.runs),
            root="",
        ),
        encoding="utf-8",
    )
    crit_dir = out_dir / "criteria"
    crit_dir.mkdir(exist_ok=True)
    page = env.get_template("criterion.html.j2")
    by_id = {c["id"]: c for c in report.catalogue}
    for c in report.catalogue:
        per_agent = criterion_agents(c, report.agents, paths)
        pictures = [r["picture"] for a in per_agent for r in a["featured"] if r.get("picture")]
        for later in pictures[1:]:
            later["legend"] = False  # one legend per page, on its first picture
        (crit_dir / f"{c['id']}.html").write_text(
            page.render(
                **common, c=c, source=describe(c.get("source")), per_agent=per_agent, root="../"
            ),
            encoding="utf-8",
        )
    scenario_tpl = env.get_template("scenario.html.j2")
    with ThreadPoolExecutor(max_workers=2) as pool:
        pending: deque[Any] = deque()
        for a in report.agents:
            cited: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
            for cid, res in a.data["criteria"].items():
                for s in res.get("scenarios", []):
                    c = by_id.get(cid, {"id": cid, "title": "", "level": "", "area": ""})
                    cited.setdefault(s["id"], []).append((c, s))
            for sid, sc in a.scenarios.items():
                p = paths[a.name][sid]
                view = scenario_page(a, sc, cited.get(sid, []), p)
                target = out_dir / p.page
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(
                    scenario_tpl.render(**common, s=view, root="../../"), encoding="utf-8"
                )
                pending.append(write_evidence(out_dir / p.evidence, sc, pool))
                while len(pending) > 4:  # a few scenarios' bytes in memory at a time
                    pending.popleft().result()
        for done in pending:
            done.result()  # a write that failed fails the render
    return index
