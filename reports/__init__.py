"""Render conformance results into HTML, JUnit XML and Markdown."""
