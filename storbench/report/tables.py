"""Export one table to CSV, Markdown, LaTeX (booktabs) and HTML for papers and reports.

Cells are already-formatted strings or numbers; numbers are written with ``str`` (floats
round-trip), None/NaN/NA as an empty cell. Text is escaped for each format, never
reformatted. pandas writes the tables (``Styler.to_latex``/``to_html``, ``to_markdown``
through tabulate); the escaping is ours: pandas' LaTeX escape leaves µ ± < > | and the
dashes as they are (OT1 fonts print < as ¡) and is not public for captions and notes.
"""

from __future__ import annotations

import csv
import hashlib
import html
import io
import numbers
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import jinja2
import pandas as pd
from pandas.io.formats.style import Styler

from storbench.core import atomic, paths

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
_MARKDOWN_ALIGNMENTS = {"l": "left", "c": "center", "r": "right"}
_HTML_ALIGNMENTS = {"c": "text-align: center", "r": "text-align: right"}
_LATEX_FLOAT_END = r"\end{table}"


@dataclass
class Table:
    """A captioned table: column names, rows of cells, optional label, alignment and notes.

    ``align`` has one letter per column (l, c or r); by default a column whose cells are
    all numbers is right-aligned, any other left-aligned. ``label`` names the table for
    cross-references (LaTeX \\label, HTML id 'T_' + label); ``notes`` are printed below it.
    ``shown``: the rows a report page shows (None: all) with ``shown_note`` saying which; the
    exported files always hold every row.
    """

    columns: list[str]
    rows: list[list]
    caption: str = ""
    label: str = ""
    align: str | None = None
    notes: Sequence[str] = ()
    shown: Sequence[int] | None = None
    shown_note: str = ""

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
        lines.append(pipe_table(self.columns, self.rows, self.alignment))
        for note in self.notes:
            lines += ["", _markdown_text(note)]
        return "\n".join(lines) + "\n"

    def to_latex(self) -> str:
        """A booktabs tabular in a table float with caption, label and notes when given."""
        latex = self._styler(latex_escape).to_latex(
            column_format=self.alignment,
            hrules=True,
            position="htbp",
            position_float="centering",
            caption=latex_escape(self.caption) or None,
            label=self.label or None,
        )
        return _with_latex_notes(latex, self.notes)

    def to_html(self) -> str:
        """An escaped <table> with <caption>, <thead>, <tbody> and the notes in <tfoot>.

        Numbers keep their alignment through a <style> block scoped to the table's id: 'T_'
        and the label (other characters than letters, digits, _ and - as -), or a digest of
        the header without a label.
        """
        styler = self._styler(html.escape, styler_class=_NotesStyler, uuid=self._html_uuid())
        styler.set_table_styles(_html_alignment_styles(self.alignment))
        if self.caption:
            styler.set_caption(html.escape(self.caption))
        return styler.to_html(
            notes=[html.escape(note) for note in self.notes], notes_span=len(self.columns)
        )

    def _styler(self, escape: Callable[[str], str], styler_class=Styler, **options) -> Styler:
        headers = [escape(cell_text(column)) for column in self.columns]
        return (
            styler_class(_frame(self.rows, escape, len(self.columns)), cell_ids=False, **options)
            .hide(axis="index")
            .format_index(lambda position: headers[position], axis="columns")
        )

    def _html_uuid(self) -> str:
        if self.label:
            return re.sub(r"[^A-Za-z0-9_-]", "-", self.label)
        header = "\x1f".join(cell_text(column) for column in self.columns) + self.alignment
        return hashlib.sha256(header.encode()).hexdigest()[:10]


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


def pipe_table(columns: Sequence, rows: Sequence[Sequence], alignment: str = "") -> str:
    """A GitHub/Pandoc pipe table (pandas through tabulate): pipes escaped, cells as written.

    ``alignment`` has one letter (l, c or r) per column; tabulate's default without it.
    """
    return _frame(rows, _markdown_text, len(columns)).to_markdown(
        index=False,
        tablefmt="pipe",
        headers=[_markdown_text(column) for column in columns],
        colalign=[_MARKDOWN_ALIGNMENTS[letter] for letter in alignment] or None,
        disable_numparse=True,  # cells are already formatted: never reformat '1.50' as '1.5'
    )


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


def _frame(rows: Sequence[Sequence], escape: Callable[[str], str], width: int) -> pd.DataFrame:
    """The cells as escaped text; columns numbered, as headers may repeat and Styler needs keys."""
    cells = [[escape(cell_text(cell)) for cell in row] for row in rows]
    return pd.DataFrame(cells, columns=range(width), dtype=object)


def _with_latex_notes(latex: str, notes: Sequence[str]) -> str:
    """The notes in footnote size between the tabular and the end of the float."""
    if not notes:
        return latex
    table, float_end = latex.rsplit(_LATEX_FLOAT_END, 1)
    note_lines = [rf"{{\footnotesize {latex_escape(note)}\par}}" for note in notes]
    return "\n".join([table + r"\par\smallskip", *note_lines, _LATEX_FLOAT_END + float_end])


def _html_alignment_styles(alignment: str) -> dict[int, list[dict[str, str]]]:
    return {
        position: [{"selector": "th, td", "props": _HTML_ALIGNMENTS[letter]}]
        for position, letter in enumerate(alignment)
        if letter in _HTML_ALIGNMENTS
    }


class _NotesStyler(Styler):
    """pandas' Styler whose HTML table ends with the notes in a <tfoot>."""

    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(
            [jinja2.FileSystemLoader(paths.REPORT_TEMPLATES_DIR), Styler.loader]
        ),
        trim_blocks=True,  # as pandas' own environment, which its templates are written for
    )
    template_html_table = env.get_template("exported_table.html.j2")
