"""Export one table to CSV, Markdown, LaTeX (booktabs) and HTML for papers and reports.

Cells are already-formatted strings or numbers; numbers are written with ``str`` (floats
round-trip), None/NaN/NA as an empty cell. Text is escaped for each format, never
reformatted.
"""

from __future__ import annotations

import csv
import html
import io
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from storbench.core import atomic

ALIGNMENTS = "lcr"
SUFFIXES = ("csv", "md", "tex", "html")

# One pass over the text, so the backslashes of one replacement are never escaped again.
LATEX_ESCAPES = {
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "\\": r"\textbackslash{}",
    # OT1 fonts would print < > | as other glyphs.
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    "\u00b5": r"\textmu{}",  # micro sign
    "\u03bc": r"\textmu{}",  # Greek small mu
    "±": r"$\pm$",
    "×": r"$\times$",
    "≤": r"$\leq$",
    "≥": r"$\geq$",
    "≈": r"$\approx$",
    "–": "--",
    "—": "---",
    "†": r"\dag{}",
    "‡": r"\ddag{}",
    "°": r"\textdegree{}",
    "\n": " ",
}
_LATEX_TABLE = str.maketrans(LATEX_ESCAPES)
_LABEL_FORBIDDEN = set("\\{}%#~^&$ \n")
_MARKDOWN_RULES = {"l": ":---", "c": ":---:", "r": "---:"}


@dataclass
class Table:
    """A captioned table: column names, rows of cells, optional label, alignment and notes.

    ``align`` has one letter per column (l, c or r); by default a column whose cells are
    all numbers is right-aligned, any other left-aligned. ``label`` names the table for
    cross-references (LaTeX \\label, HTML id); ``notes`` are printed below the table.
    """

    columns: list[str]
    rows: list[list]
    caption: str = ""
    label: str = ""
    align: str | None = None
    notes: Sequence[str] = ()

    def __post_init__(self):
        if not self.columns:
            raise ValueError("Table: columns must name at least one column")
        width = len(self.columns)
        for number, row in enumerate(self.rows, start=1):
            if len(row) != width:
                raise ValueError(
                    f"Table: row {number} has {len(row)} cells, expected {width} "
                    f"(columns {', '.join(map(str, self.columns))})"
                )
        if self.align is not None and (
            len(self.align) != width or set(self.align) - set(ALIGNMENTS)
        ):
            raise ValueError(
                f"Table: align {self.align!r} must be one of l, c, r per column ({width} columns)"
            )
        if isinstance(self.notes, str):
            raise ValueError("Table: notes must be a list of strings, not one string")
        if _LABEL_FORBIDDEN & set(self.label):
            raise ValueError(f"Table: label {self.label!r} must not contain spaces or \\{{}}%#~^&$")

    @property
    def alignment(self) -> str:
        """``align``, or 'r' for all-number columns and 'l' for the others."""
        if self.align is not None:
            return self.align
        if not self.rows:
            return "l" * len(self.columns)
        return "".join(_default_alignment(column) for column in zip(*self.rows, strict=True))

    def text_rows(self) -> list[list[str]]:
        """The rows with every cell as text (``cell_text``)."""
        return [[cell_text(cell) for cell in row] for row in self.rows]

    def to_csv(self) -> str:
        """Header and rows as CSV (caption, label and notes are not part of the data)."""
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([cell_text(column) for column in self.columns])
        writer.writerows(self.text_rows())
        return buffer.getvalue()

    def to_markdown(self) -> str:
        """A GitHub/Pandoc pipe table; the caption as a Pandoc 'Table:' line above it."""
        lines = [f"Table: {_markdown_text(self.caption)}", ""] if self.caption else []
        lines.append(_markdown_row(self.columns))
        lines.append(_markdown_row([_MARKDOWN_RULES[letter] for letter in self.alignment]))
        lines += [_markdown_row(row) for row in self.text_rows()]
        for note in self.notes:
            lines += ["", _markdown_text(note)]
        return "\n".join(lines) + "\n"

    def to_latex(self) -> str:
        """A booktabs tabular in a table float with caption and label when given."""
        lines = [r"\begin{table}[htbp]", r"\centering"]
        if self.caption:
            lines.append(rf"\caption{{{latex_escape(self.caption)}}}")
        if self.label:
            lines.append(rf"\label{{{self.label}}}")
        lines += [rf"\begin{{tabular}}{{{self.alignment}}}", r"\toprule"]
        lines.append(_latex_row(self.columns))
        lines.append(r"\midrule")
        lines += [_latex_row(row) for row in self.text_rows()]
        lines += [r"\bottomrule", r"\end{tabular}"]
        if self.notes:
            lines.append(r"\par\smallskip")
            lines += [rf"{{\footnotesize {latex_escape(note)}\par}}" for note in self.notes]
        lines.append(r"\end{table}")
        return "\n".join(lines) + "\n"

    def to_html(self) -> str:
        """An escaped <table> with <caption>, <thead>, <tbody> and the notes in <tfoot>."""
        opening = f'<table id="{html.escape(self.label)}">' if self.label else "<table>"
        lines = [opening]
        if self.caption:
            lines.append(f"<caption>{html.escape(self.caption)}</caption>")
        lines += ["<thead>", self._html_row("th", self.columns), "</thead>", "<tbody>"]
        lines += [self._html_row("td", row) for row in self.text_rows()]
        lines.append("</tbody>")
        if self.notes:
            span = len(self.columns)
            notes = [f'<tr><td colspan="{span}">{html.escape(n)}</td></tr>' for n in self.notes]
            lines += ["<tfoot>", *notes, "</tfoot>"]
        lines.append("</table>")
        return "\n".join(lines) + "\n"

    def _html_row(self, tag: str, cells: Sequence) -> str:
        parts = [
            f"<{tag}{_html_alignment(letter)}>{html.escape(cell_text(cell))}</{tag}>"
            for letter, cell in zip(self.alignment, cells, strict=True)
        ]
        return "<tr>" + "".join(parts) + "</tr>"


def write_all(table: Table, out_dir: str | Path, stem: str) -> dict[str, Path]:
    """Write stem.csv, stem.md, stem.tex and stem.html atomically; {file name: path}."""
    if not stem or "/" in stem or stem in (".", ".."):
        raise ValueError(f"write_all: stem {stem!r} must be a plain file name without '/'")
    renderers = {
        "csv": table.to_csv,
        "md": table.to_markdown,
        "tex": table.to_latex,
        "html": table.to_html,
    }
    written = {}
    for suffix in SUFFIXES:
        path = Path(out_dir) / f"{stem}.{suffix}"
        atomic.write_text(path, renderers[suffix]())
        written[path.name] = path
    return written


def cell_text(value) -> str:
    """A cell as text: strings as they are, numbers with str, None/NaN/NA as ''."""
    if _is_missing(value):
        return ""
    return str(value)


def latex_escape(text: str) -> str:
    """Text with LaTeX's special characters (& % $ # _ { } ~ ^ \\ and µ ± …) escaped."""
    return str(text).translate(_LATEX_TABLE)


def _is_missing(value) -> bool:
    return value is None or (pd.api.types.is_scalar(value) and bool(pd.isna(value)))


def _is_number(value) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def _default_alignment(cells: Sequence) -> str:
    present = [cell for cell in cells if not _is_missing(cell)]
    return "r" if present and all(_is_number(cell) for cell in present) else "l"


def _markdown_text(text) -> str:
    return cell_text(text).replace("|", r"\|").replace("\n", " ")


def _markdown_row(cells: Sequence) -> str:
    return "| " + " | ".join(_markdown_text(cell) for cell in cells) + " |"


def _latex_row(cells: Sequence) -> str:
    return " & ".join(latex_escape(cell_text(cell)) for cell in cells) + r" \\"


def _html_alignment(letter: str) -> str:
    return {"l": "", "c": ' style="text-align: center"', "r": ' style="text-align: right"'}[letter]
