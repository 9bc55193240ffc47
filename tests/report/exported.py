"""Read exported tables back: the cells of a Markdown pipe table and of an HTML table."""

from __future__ import annotations

import re
from html.parser import HTMLParser

_UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")
_PIPE_RULE = re.compile(r"^\|[\s:|-]+\|$")


def pipe_table_rows(markdown: str) -> list[list[str]]:
    """Header and body rows of the pipe table in ``markdown``, cells stripped of padding."""
    return [
        [cell.strip() for cell in _UNESCAPED_PIPE.split(line)[1:-1]]
        for line in markdown.splitlines()
        if line.startswith("|") and not _PIPE_RULE.match(line)
    ]


class _TableCells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.sections: dict[str, list[list[str]]] = {}
        self.caption = ""
        self._section = ""
        self._in_cell = self._in_caption = False

    def handle_starttag(self, tag, attrs):
        if tag in ("thead", "tbody", "tfoot"):
            self._section = tag
            self.sections.setdefault(tag, [])
        elif tag == "tr":
            self.sections[self._section].append([])
        elif tag in ("th", "td"):
            self._in_cell = True
            self.sections[self._section][-1].append("")
        elif tag == "caption":
            self._in_caption = True

    def handle_endtag(self, tag):
        if tag in ("th", "td"):
            self._in_cell = False
        elif tag == "caption":
            self._in_caption = False

    def handle_data(self, data):
        if self._in_cell:
            self.sections[self._section][-1][-1] += data
        elif self._in_caption:
            self.caption += data


def html_table_cells(page: str) -> tuple[str, dict[str, list[list[str]]]]:
    """(caption, {'thead'/'tbody'/'tfoot': rows of unescaped cell texts}) of one <table>."""
    parser = _TableCells()
    parser.feed(page)
    parser.close()
    return parser.caption, parser.sections
