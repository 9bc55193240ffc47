"""Table export: exact CSV, Markdown and LaTeX text, HTML cells, escaping, empty tables, files."""

from __future__ import annotations

import csv
import io
import math

import pytest

from storbench.report import tables
from storbench.report.tables import Table
from tests.report.exported import html_table_cells, pipe_table_rows


def small_table(**extra) -> Table:
    fields = {
        "columns": ["Run", "BW (MiB/s)", "CoV"],
        "rows": [["seq_1m", 1234.5, "2.0 %"], ["rand_4k", 12, "9.1 % †"]],
        "caption": "Bandwidth ± sd",
        "label": "tab:bw",
        "notes": ["† CoV > 5 %."],
    }
    fields.update(extra)
    return Table(**fields)


def test_csv_of_small_table():
    assert small_table().to_csv() == (
        "Run,BW (MiB/s),CoV\nseq_1m,1234.5,2.0 %\nrand_4k,12,9.1 % †\n"
    )


def test_markdown_of_small_table():
    assert small_table().to_markdown() == (
        "Table: Bandwidth ± sd\n"
        "\n"
        "| Run     |   BW (MiB/s) | CoV     |\n"
        "|:--------|-------------:|:--------|\n"
        "| seq_1m  |       1234.5 | 2.0 %   |\n"
        "| rand_4k |           12 | 9.1 % † |\n"
        "\n"
        "† CoV > 5 %.\n"
    )


def test_markdown_has_one_line_per_row_with_its_cells_as_written():
    rows = [["a", "1.50", 0.1 + 0.2, "1e3"], ["b", "", 7, "2,003 ± 135"]]
    table = Table(columns=["Run", "GB/s", "x", "IOPS"], rows=rows)
    lines = table.to_markdown().splitlines()
    assert len(lines) == 2 + len(rows)  # header, rule, one line per row
    # Not renumbered: '1.50' keeps its zero, '1e3' stays text, floats round-trip.
    assert pipe_table_rows(table.to_markdown()) == [
        ["Run", "GB/s", "x", "IOPS"],
        ["a", "1.50", "0.30000000000000004", "1e3"],
        ["b", "", "7", "2,003 ± 135"],
    ]


def test_latex_of_small_table():
    assert small_table().to_latex() == (
        "\\begin{table}[htbp]\n"
        "\\centering\n"
        "\\caption{Bandwidth $\\pm$ sd}\n"
        "\\label{tab:bw}\n"
        "\\begin{tabular}{lrl}\n"
        "\\toprule\n"
        "Run & BW (MiB/s) & CoV \\\\\n"
        "\\midrule\n"
        "seq\\_1m & 1234.5 & 2.0 \\% \\\\\n"
        "rand\\_4k & 12 & 9.1 \\% \\dag{} \\\\\n"
        "\\bottomrule\n"
        "\\end{tabular}\n"
        "\\par\\smallskip\n"
        "{\\footnotesize \\dag{} CoV \\textgreater{} 5 \\%.\\par}\n"
        "\\end{table}\n"
    )


def test_html_of_small_table():
    page = small_table().to_html()
    caption, sections = html_table_cells(page)
    assert caption == "Bandwidth ± sd"
    assert sections == {
        "thead": [["Run", "BW (MiB/s)", "CoV"]],
        "tbody": [["seq_1m", "1234.5", "2.0 %"], ["rand_4k", "12", "9.1 % †"]],
        "tfoot": [["† CoV > 5 %."]],
    }
    assert '<table id="T_tab-bw">' in page  # the label, as an HTML id
    assert '<td colspan="3">† CoV &gt; 5 %.</td>' in page
    # The number column is right-aligned by the table's own style block.
    assert "#T_tab-bw th.col1 {\n  text-align: right;\n}" in page
    assert "#T_tab-bw  td.col1 {\n  text-align: right;\n}" in page
    assert "col0 {" not in page and "col2 {" not in page


def test_html_header_and_cells_are_escaped():
    table = Table(columns=["p99 < 1 ms", "a_b"], rows=[["<b>x</b>", 5], ["a & b", 6]])
    page = table.to_html()
    assert '<th class="col_heading level0 col0" >p99 &lt; 1 ms</th>' in page
    assert '<td class="data row0 col0" >&lt;b&gt;x&lt;/b&gt;</td>' in page
    assert "<b>" not in page
    assert html_table_cells(page)[1] == {
        "thead": [["p99 < 1 ms", "a_b"]],
        "tbody": [["<b>x</b>", "5"], ["a & b", "6"]],
    }


def test_without_caption_label_and_notes_only_the_table_is_written():
    plain = Table(columns=["a", "b"], rows=[["x", 1]], align="cl")
    assert plain.to_markdown() == "|  a  | b   |\n|:---:|:----|\n|  x  | 1   |\n"
    assert plain.to_latex() == (
        "\\begin{table}[htbp]\n\\centering\n\\begin{tabular}{cl}\n\\toprule\n"
        "a & b \\\\\n\\midrule\nx & 1 \\\\\n\\bottomrule\n\\end{tabular}\n\\end{table}\n"
    )
    page = plain.to_html()
    assert "<caption>" not in page and "<tfoot>" not in page
    assert html_table_cells(page)[1] == {"thead": [["a", "b"]], "tbody": [["x", "1"]]}
    assert "th.col0 {\n  text-align: center;\n}" in page
    # Without a label the id is a digest of the header: stable, so the file is reproducible.
    assert page == plain.to_html() and '<table id="T_' in page


def test_latex_export_escapes_specials_and_keeps_rows_and_numbers():
    rows = [["a_b", 12.5, "p99 %"], ["c#d", 0.1 + 0.2, "4 & 5 µs"], ["e", 7, ""]]
    table = Table(columns=["Run", "p99 %", "a_b"], rows=rows)
    latex = table.to_latex()
    tabular = latex.split("\\begin{tabular}{lrl}\n")[1].split("\\end{tabular}")[0]
    assert tabular.startswith("\\toprule\n") and tabular.endswith("\\bottomrule\n")
    header, body = tabular.removeprefix("\\toprule\n").split("\\midrule\n")
    assert header == "Run & p99 \\% & a\\_b \\\\\n"
    body_rows = body.removesuffix("\\bottomrule\n").splitlines()
    assert len(body_rows) == len(rows)
    cells = [row.removesuffix(" \\\\").split(" & ") for row in body_rows]
    assert cells == [
        ["a\\_b", "12.5", "p99 \\%"],
        ["c\\#d", "0.30000000000000004", "4 \\& 5 \\textmu{}s"],
        ["e", "7", ""],
    ]
    assert [float(row[1]) for row in cells] == [row[1] for row in rows]
    assert "%" not in latex.replace("\\%", "") and "_" not in latex.replace("\\_", "")


@pytest.mark.parametrize(
    ("text", "latex"),
    [
        ("&", r"\&"),
        ("%", r"\%"),
        ("$", r"\$"),
        ("#", r"\#"),
        ("_", r"\_"),
        ("{", r"\{"),
        ("}", r"\}"),
        ("~", r"\textasciitilde{}"),
        ("^", r"\textasciicircum{}"),
        ("\\", r"\textbackslash{}"),
        ("\u00b5s", r"\textmu{}s"),  # micro sign
        ("\u03bcs", r"\textmu{}s"),  # Greek mu
        ("±", r"$\pm$"),
        ("<", r"\textless{}"),
        (">", r"\textgreater{}"),
        ("|", r"\textbar{}"),
        ("–", "--"),
        ("†", r"\dag{}"),
        ("×", r"$\times$"),
        ("two\nlines", "two lines"),
        # One pass: the backslash and braces of one replacement are not escaped again.
        ("\\{x}", r"\textbackslash{}\{x\}"),
        ("p99_ns ~ 1 µs & 5 %", r"p99\_ns \textasciitilde{} 1 \textmu{}s \& 5 \%"),
    ],
)
def test_latex_escapes_each_special_character(text, latex):
    assert tables.latex_escape(text) == latex
    table = Table(columns=[text], rows=[[text]], caption=text)
    lines = table.to_latex().splitlines()
    assert lines[2] == f"\\caption{{{latex}}}"
    assert f"{latex} \\\\" in lines  # header and body cell


@pytest.mark.parametrize(
    ("text", "escaped"),
    [("<b>", "&lt;b&gt;"), ("a & b", "a &amp; b"), ('"q"', "&quot;q&quot;"), ("'", "&#x27;")],
)
def test_html_escapes_markup(text, escaped):
    table = Table(columns=[text], rows=[[text]], caption=text, notes=[text])
    page = table.to_html()
    assert f"<caption>{escaped}</caption>" in page
    assert f">{escaped}</th>" in page
    assert f">{escaped}</td>" in page
    assert f'<td colspan="1">{escaped}</td>' in page
    assert text not in page.replace(escaped, "").split("</style>")[1]
    caption, sections = html_table_cells(page)
    assert caption == text and sections == {"thead": [[text]], "tbody": [[text]], "tfoot": [[text]]}


def test_markdown_escapes_pipes_and_newlines():
    table = Table(columns=["a|b"], rows=[["one\ntwo"]], caption="x|y")
    assert table.to_markdown() == "Table: x\\|y\n\n| a\\|b    |\n|:--------|\n| one two |\n"


def test_csv_quotes_commas_and_quotes_and_reads_back():
    rows = [['say "hi", then', 1.5], ["line\nbreak", -3]]
    table = Table(columns=["text", "value"], rows=rows)
    text = table.to_csv()
    assert text.splitlines()[1] == '"say ""hi"", then",1.5'
    assert list(csv.reader(io.StringIO(text))) == [
        ["text", "value"],
        ['say "hi", then', "1.5"],
        ["line\nbreak", "-3"],
    ]


def test_empty_table_keeps_header_and_rules():
    empty = Table(columns=["Run", "IOPS"], rows=[], caption="Nothing ran")
    assert empty.alignment == "ll"
    assert empty.to_csv() == "Run,IOPS\n"
    assert empty.to_markdown() == "Table: Nothing ran\n\n| Run   | IOPS   |\n|-------|--------|\n"
    assert empty.to_latex() == (
        "\\begin{table}[htbp]\n\\centering\n\\caption{Nothing ran}\n"
        "\\begin{tabular}{ll}\n\\toprule\nRun & IOPS \\\\\n\\midrule\n"
        "\\bottomrule\n\\end{tabular}\n\\end{table}\n"
    )
    page = empty.to_html()
    assert html_table_cells(page) == ("Nothing ran", {"thead": [["Run", "IOPS"]], "tbody": []})


def test_missing_cells_are_empty_and_numbers_keep_full_precision():
    table = Table(columns=["n", "x"], rows=[[None, 0.1 + 0.2], [math.nan, 3], [2, None]])
    assert table.text_rows() == [["", "0.30000000000000004"], ["", "3"], ["2", ""]]
    assert table.alignment == "rr"  # missing cells do not make a number column text
    assert Table(columns=["flag"], rows=[[True]]).alignment == "l"  # bools are not numbers


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"columns": [], "rows": []}, "at least one column"),
        ({"columns": ["a", "b"], "rows": [["x"]]}, "row 1 has 1 cells, expected 2"),
        ({"columns": ["a"], "rows": [], "align": "x"}, "align 'x'"),
        ({"columns": ["a"], "rows": [], "align": "lr"}, "align 'lr'"),
        ({"columns": ["a"], "rows": [], "label": "tab:a b"}, "label 'tab:a b'"),
        ({"columns": ["a"], "rows": [], "notes": "one note"}, "notes must be a list"),
    ],
)
def test_invalid_tables_are_rejected_with_the_field_named(fields, message):
    with pytest.raises(ValueError, match=message):
        Table(**fields)


def test_write_all_writes_four_files_atomically(tmp_path):
    table = small_table()
    out_dir = tmp_path / "tables"
    written = tables.write_all(table, out_dir, "bandwidth")

    assert written == {
        "bandwidth.csv": out_dir / "bandwidth.csv",
        "bandwidth.md": out_dir / "bandwidth.md",
        "bandwidth.tex": out_dir / "bandwidth.tex",
        "bandwidth.html": out_dir / "bandwidth.html",
    }
    assert written["bandwidth.csv"].read_text() == table.to_csv()
    assert written["bandwidth.md"].read_text() == table.to_markdown()
    assert written["bandwidth.tex"].read_text() == table.to_latex()
    assert written["bandwidth.html"].read_text() == table.to_html()
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(written)  # no .tmp left


@pytest.mark.parametrize("stem", ["", "a/b", ".."])
def test_write_all_rejects_a_stem_that_is_not_a_file_name(tmp_path, stem):
    with pytest.raises(ValueError, match="stem"):
        tables.write_all(small_table(), tmp_path, stem)
    assert list(tmp_path.iterdir()) == []
