"""Table export: exact CSV, Markdown, LaTeX and HTML text, escaping, empty tables, files."""

from __future__ import annotations

import csv
import io
import math

import pytest

from storbench.report import tables
from storbench.report.tables import Table


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
        "| Run | BW (MiB/s) | CoV |\n"
        "| :--- | ---: | :--- |\n"
        "| seq_1m | 1234.5 | 2.0 % |\n"
        "| rand_4k | 12 | 9.1 % † |\n"
        "\n"
        "† CoV > 5 %.\n"
    )


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
    right = ' style="text-align: right"'
    assert small_table().to_html() == (
        '<table id="tab:bw">\n'
        "<caption>Bandwidth ± sd</caption>\n"
        "<thead>\n"
        f"<tr><th>Run</th><th{right}>BW (MiB/s)</th><th>CoV</th></tr>\n"
        "</thead>\n"
        "<tbody>\n"
        f"<tr><td>seq_1m</td><td{right}>1234.5</td><td>2.0 %</td></tr>\n"
        f"<tr><td>rand_4k</td><td{right}>12</td><td>9.1 % †</td></tr>\n"
        "</tbody>\n"
        "<tfoot>\n"
        '<tr><td colspan="3">† CoV &gt; 5 %.</td></tr>\n'
        "</tfoot>\n"
        "</table>\n"
    )


def test_without_caption_label_and_notes_only_the_table_is_written():
    plain = Table(columns=["a", "b"], rows=[["x", 1]], align="cl")
    assert plain.to_markdown() == "| a | b |\n| :---: | :--- |\n| x | 1 |\n"
    assert plain.to_latex() == (
        "\\begin{table}[htbp]\n\\centering\n\\begin{tabular}{cl}\n\\toprule\n"
        "a & b \\\\\n\\midrule\nx & 1 \\\\\n\\bottomrule\n\\end{tabular}\n\\end{table}\n"
    )
    center = ' style="text-align: center"'
    assert plain.to_html() == (
        f"<table>\n<thead>\n<tr><th{center}>a</th><th>b</th></tr>\n</thead>\n"
        f"<tbody>\n<tr><td{center}>x</td><td>1</td></tr>\n</tbody>\n</table>\n"
    )


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
    assert f"<th>{escaped}</th>" in page
    assert f"<td>{escaped}</td>" in page
    assert f'<td colspan="1">{escaped}</td>' in page
    assert text not in page.replace(escaped, "")


def test_markdown_escapes_pipes_and_newlines():
    table = Table(columns=["a|b"], rows=[["one\ntwo"]], caption="x|y")
    assert table.to_markdown() == "Table: x\\|y\n\n| a\\|b |\n| :--- |\n| one two |\n"


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
    assert empty.to_markdown() == "Table: Nothing ran\n\n| Run | IOPS |\n| :--- | :--- |\n"
    assert empty.to_latex() == (
        "\\begin{table}[htbp]\n\\centering\n\\caption{Nothing ran}\n"
        "\\begin{tabular}{ll}\n\\toprule\nRun & IOPS \\\\\n\\midrule\n"
        "\\bottomrule\n\\end{tabular}\n\\end{table}\n"
    )
    assert empty.to_html() == (
        "<table>\n<caption>Nothing ran</caption>\n<thead>\n"
        "<tr><th>Run</th><th>IOPS</th></tr>\n</thead>\n<tbody>\n</tbody>\n</table>\n"
    )


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
