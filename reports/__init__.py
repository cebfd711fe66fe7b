"""Render conformance results into HTML, JUnit XML and Markdown.

Usage::

    from reports import render, validate_results
    index = render([results_doc], Path("report"), secrets=[api_key])
"""

from __future__ import annotations

from reports.cli import main
from reports.errors import ReportsError, ResultsError, ScreenshotError
from reports.junit import render_junit
from reports.markdown import render_markdown
from reports.render import render
from reports.schema import load_schema, validate_results

__all__ = [
    "ReportsError",
    "ResultsError",
    "ScreenshotError",
    "load_schema",
    "main",
    "render",
    "render_junit",
    "render_markdown",
    "validate_results",
]
