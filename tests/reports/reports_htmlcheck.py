"""A stdlib HTML parser collecting ids, links, URLs and text for report checks."""

from __future__ import annotations

import lzma
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = ["PageScan", "read_text", "scan", "scenario_pages"]

_CSS_URL = re.compile(r"url\(\s*['\"]?([^'\")]+)")


class PageScan(HTMLParser):
    """Collects element ids, href/src values, CSS url() targets, text and tag names."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.urls: list[str] = []
        self.text: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if "id" in a and a["id"]:
            self.ids.add(a["id"])
        for k in ("href", "src", "action", "poster", "data"):
            if a.get(k) is not None:
                self.links.append(a[k])
        for k, v in a.items():
            if k == "style" and v:
                self.urls += _CSS_URL.findall(v)
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        if tag == "style":
            self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.urls += _CSS_URL.findall(data)
        else:
            self.text.append(data)


def scan(html: str) -> PageScan:
    p = PageScan()
    p.feed(html)
    p.close()
    return p


def read_text(path: Path) -> str:
    """A report file's text, an xz-compressed evidence file's decompressed."""
    data = path.read_bytes()
    if path.name.endswith(".xz"):
        data = lzma.decompress(data)
    return data.decode("utf-8")


def scenario_pages(criterion_page: Path) -> list[Path]:
    """The scenario pages a criterion page links to, in link order, each once."""
    out: list[Path] = []
    for link in scan(criterion_page.read_text("utf-8")).links:
        path = urlsplit(link).path
        if "scenarios/" in path:
            target = (criterion_page.parent / unquote(path)).resolve()
            if target not in out:
                out.append(target)
    return out
