"""Read a vdbench output folder (``-o DIR``) into result rows and time-series rows.

Files read (the fixture README, tests/fixtures/vdbench/README.md, describes them):

- ``flatfile.html``: one whitespace-separated row per reporting interval, and an
  ``avg_<first>-<last>`` row closing every run (vdbench's first interval, or ``warmup=``, is
  left out of the average). Raw (SD/WD) columns: ``rate MB/sec bytes/io read% read_resp
  write_resp read_max write_max read_std write_std xfersize threads rdpct seekpct lunsize``
  (before 5.04.07 no per-op max and std: ``resp_max``/``resp_std`` only, an op's where
  every I/O was that op);
  file-system (FSD/FWD) columns: ``Xfersize Rate MB_read MB_write Read_rate Read_resp
  Read_resp_std Read_resp_max Write_rate ...`` and one set per metadata operation (before
  5.04.07 no ``_resp_std``/``_resp_max``).
  Response times are in ms, MB = 1024**2. The avg row is the run's result: the same numbers
  as the ``avg_`` line vdbench prints in ``summary.html``/``totals.html``, unrounded; an
  ``avg_2-N`` that is the mean of intervals 1-N (vdbench 5.04.06) counts as ``avg_1-N`` (its
  duration and I/O count).
- ``totals.html`` (else ``summary.html``): the ``Starting RD=rd1; ... For loops:
  xfersize=4k rdpct=70`` line of every run, in flatfile order; the flatfile's FSD rows do not
  carry rdpct, so a run's for-loop values come from here. Without either file (a lone
  flatfile) the loop values are the raw flatfile's requested xfersize/rdpct/threads/seekpct
  that differ between runs of the same RD.
- ``histogram.html``: per-run response-time buckets of the averaged intervals. Raw runs
  print ``Reads:``/``Writes:`` (or ``Only reads/writes done``) separately, which become the
  op's ``hist_ns``/``hist_count`` (upper bucket bounds in ns; the open last bucket
  ``2000 < max`` gets the op's maximum response time) and its percentiles
  (``pct_source='histogram'``; ``Reads and writes:`` alone, a run of one op, is that
  op's). File-system runs print one ``Total of all requested operations`` histogram: it is
  used only when the run did a single operation, otherwise the percentiles stay null. A
  histogram whose count disagrees with the flatfile's is not used.
- A multi-host run (one master, ``hd=`` lines): ``<hd>.html``, each host's table of
  ``summary.html`` (its numbers rounded), and ``<hd>.histogram.html`` give rows per host,
  named by the hd's ``system=`` (``parmfile.html``).
- ``logfile.html``: ``Vdbench distribution: vdbench50407`` -> ``tool_version``;
  ``errorlog.html``: ``errors`` = 0 when it holds no message, null otherwise (vdbench does
  not tie its I/O and data-validation errors to a run).

CPU (``cpu_pct``, ``cpu_sys_pct``, basis ``host``): vdbench's ``cpu% sys+u`` and ``cpu% sys``
of the run's avg row, on each of the run's rows: on Linux its /proc/stat user and
system+irq+softirq time of all the host's CPUs over the averaged intervals. From the
flatfile as ``cpu_user`` + ``cpu_kernel`` and ``cpu_kernel``: a multi-host master's flatfile
repeats ``cpu_user`` as ``cpu_used`` (4 hosts: 32.7793 and 32.7793, where totals.html prints
sys+u 80.2 = 32.78 + 47.47), a single host's has cpu_used = their sum. A host report's
(``<hd>.html``) ``cpu% sys+u`` and ``cpu% sys`` for its host; the master's flatfile for a
multi-host run's 'all' rows (vdbench's total: the hosts' times summed, their mean).
``NaN`` (no CPU figures) stays null.

vdbench's own preparation runs (``SD_format``, ``format_for_<rd>``) are skipped. Rows: one
per measured run and op (``read``/``write``; ``mkdir``, ``rmdir``, ``delete`` and
``getattr`` -> ``stat`` when a file-system run did them). ``job`` is the RD name plus its
for-loop values (``rd1_xfersize-4k_rdpct-70``), so every run of a for-loop keeps its own
rows; ``bs``/``rwmixread``/``iodepth`` (raw: SD threads) or ``numjobs`` (file system: FWD
threads)/``rw`` are the run's own values, and ``params_json`` carries the loop point over
the base parameters. Counts: ``ios`` from the histogram when there is one, else
rate x averaged time; ``duration_s`` = averaged intervals x interval length (the median
spacing of the run's interval rows).
"""

from __future__ import annotations

import datetime
import json
import math
import re
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path

from storbench.core.aggregate import histogram_percentiles, no_percentiles
from storbench.core.numbers import MIB
from storbench.core.schema_names import CPU_HOST
from storbench.core.units import UnitError, parse_duration, parse_size, size_label
from storbench.tools.base import ToolOutputError
from storbench.tools.base import result_columns as _schema_columns
from storbench.tools.base import timeseries_columns as _timeseries_columns

RAW = "raw"
FILESYSTEM = "filesystem"
NS_PER_MS = 1_000_000
FORMAT_RUN_NAMES = ("SD_format",)
FORMAT_RUN_PREFIX = "format_for_"
HEADER_START = ["tod", "timestamp", "Run", "Interval"]
LOOP_PARAMETERS = {"xfersize": "bs", "rdpct": "rwmixread", "seekpct": "seekpct"}
_FILESYSTEM_METADATA_OPS = {
    "Mkdir": "mkdir",
    "Rmdir": "rmdir",
    "Delete": "delete",
    "Getattr": "stat",
}
_HISTOGRAM_TITLES = {
    "Only reads done for this workload:": "read",
    "Only writes done for this workload:": "write",
    "Reads:": "read",
    "Writes:": "write",
    "Total of all requested operations since warmup:": "total",
    "Total of all requested operations:": "total",  # vdbench 5.04.06
    "Reads and writes:": "total",  # a host's histogram report (hdN.histogram.html)
}
_RAW_LOOP_COLUMNS = ("xfersize", "rdpct", "threads", "seekpct")
REQUIRED_COLUMNS = {
    RAW: (
        "rate",
        "bytes/io",
        "read%",
        *_RAW_LOOP_COLUMNS,
        "read_resp",
        "write_resp",
    ),
    # vdbench 5.04.06's file-system flatfile has no <op>_resp_std/<op>_resp_max (5.04.07's)
    FILESYSTEM: (
        "Xfersize",
        "MB_read",
        "MB_write",
        "Read_rate",
        "Read_resp",
        "Write_rate",
        "Write_resp",
    ),
}

_TITLE = re.compile(r"^<title>.*?</title><pre>\n?", re.IGNORECASE)
_START = re.compile(r"Starting RD=(?P<name>[^;<\s]+)(?P<rest>[^<\n]*)")
_FOR_LOOPS = re.compile(r"For loops:\s*(?P<loops>.*)$")
_ELAPSED = re.compile(r"elapsed=(\d+)")
_AVERAGE = re.compile(r"^avg_(\d+)-(\d+)$")
_TOD = re.compile(r"^\d\d:\d\d:\d\d(\.\d+)?$")
_BUCKET = re.compile(r"^\s*(\d+(?:\.\d+)?)\s+<\s+(\d+(?:\.\d+)?|max)\s+([\d,]+)\s")
_DISTRIBUTION = re.compile(r"Vdbench distribution:\s*(\S+)")
_HOST_REPORTS = re.compile(r"^Link to HOST reports:(.*)$", re.MULTILINE)
_LINK_TEXT = re.compile(r"<A HREF=\"[^\"]*\">([^<]+)</A>", re.IGNORECASE)
_ERRORLOG_HEADER = "Error log."
_UNSAFE = re.compile(r"[^A-Za-z0-9.-]")
_HD_LINE = re.compile(r"^hd=(?P<name>[^,\s]+)(?P<rest>\S*)", re.MULTILINE)
# a host report's table (summary.html's), keyed as the flatfile's columns. Raw: i/o rate,
# MB/sec, bytes i/o, read pct, resp time, read resp, write resp, resp max, resp stddev, queue
# depth (then cpu% sys+u, cpu% sys). File system: ReqstdOps rate and resp, cpu% total and
# sys, read pct, read rate and resp, write rate and resp, MB/sec read, write and total, xfer
# size, then rate and resp of mkdir, rmdir, create, open, close and delete.
_HOST_COLUMNS = {
    RAW: ("rate", "MB/sec", "bytes/io", "read%", "resp", "read_resp", "write_resp", "resp_max",
          "resp_std", "queue_depth", "cpu_used", "cpu_kernel"),
    FILESYSTEM: ("rate", "resp", "cpu_used", "cpu_kernel", "read%", "Read_rate", "Read_resp",
                 "Write_rate", "Write_resp", "MB_read", "MB_write", "MB/sec", "Xfersize",
                 *[f"{op}_{stat}" for op in ("Mkdir", "Rmdir", "Create", "Open", "Close", "Delete")
                   for stat in ("rate", "resp")]),
}  # fmt: skip
_HOST_OPTIONAL_COLUMNS = {RAW: 2, FILESYSTEM: 0}  # trailing columns a host table may lack
_RUN_COLUMNS = ("Run", *_RAW_LOOP_COLUMNS, "lunsize")  # the same for every host of a run
WHERE = "@where"  # a row's file and line (a host report's run and interval), for messages
_FLATFILE_TIMESTAMP = re.compile(r"^(\d\d)/(\d\d)/(\d{4})-(\d\d):(\d\d):(\d\d)-(\w+)$")


@dataclass
class FlatRun:
    """The rows of one run in flatfile.html: interval rows, then the closing avg row."""

    name: str
    intervals: list[dict] = field(default_factory=list)
    average: dict = field(default_factory=dict)  # the avg_ row; a completed run has one


@dataclass(frozen=True)
class RunStart:
    """One ``Starting RD=`` line: the RD name, its for-loop values and elapsed time."""

    name: str
    loops: dict
    elapsed_s: int | None


@dataclass
class Run:
    """One measured vdbench run with everything the rows need."""

    name: str
    label: str
    kind: str
    loops: dict
    elapsed_s: int | None
    intervals: list[dict]
    average: dict
    interval_s: float
    histograms: dict  # 'read' / 'write' / 'total' -> list of (low_ms, high_ms or None, count)


@dataclass(frozen=True)
class OpRates:
    """One op's rates in one flatfile row (interval or average)."""

    iops: float
    bw_bytes_s: float | None
    bytes_per_io: float | None
    mean_ms: float | None
    max_ms: float | None
    stdev_ms: float | None


# --- files ---------------------------------------------------------------------------------


def html_text(path: Path) -> str:
    """A vdbench .html report as plain text: its ``<title>...</title><pre>`` prefix removed."""
    return _TITLE.sub("", path.read_bytes().decode("utf-8", errors="replace"), count=1)


def flatfile_path(path: Path) -> Path:
    """The flatfile of an output folder, or the path itself when it is a file."""
    return path / "flatfile.html" if path.is_dir() else path


def read_flatfile(path: Path) -> tuple[str, list[FlatRun]]:
    """(RAW or FILESYSTEM, the runs in file order); ToolOutputError if not a full flatfile."""
    if not path.is_file():
        raise ToolOutputError(f"{path}: no such file (a vdbench output folder has flatfile.html)")
    raw = path.read_bytes().decode("utf-8", errors="replace")
    text = _TITLE.sub("", raw, count=1)
    if not text.strip():
        raise ToolOutputError(f"{path}: empty file, not a vdbench flatfile")
    title_lines = raw[: len(raw) - len(text)].count("\n")  # the file's lines, for messages
    numbered = [
        (number + title_lines, line)
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.startswith("*")
    ]
    lines = [line for _, line in numbered]
    if not lines or lines[0].split()[:4] != HEADER_START:
        first = next(line.strip() for line in text.splitlines() if line.strip())
        raise ToolOutputError(
            f"{path}: not a vdbench flatfile (no 'tod timestamp Run Interval' header; "
            f"first line: {first[:120]!r})"
        )
    header = lines[0].split()
    kind = FILESYSTEM if "Read_rate" in header else RAW
    missing = [column for column in REQUIRED_COLUMNS[kind] if column not in header]
    if missing:
        raise ToolOutputError(f"{path}: flatfile header lacks column(s) {', '.join(missing)}")
    runs: list[FlatRun] = []
    current: FlatRun | None = None
    for row_number, (line_number, line) in enumerate(numbered[1:], start=1):
        cells = line.split()
        if len(cells) != len(header):
            raise ToolOutputError(
                f"{path}: truncated or malformed data row {row_number}: {len(cells)} values "
                f"for {len(header)} columns"
            )
        row = {**dict(zip(header, cells, strict=True)), WHERE: f"{path}:{line_number}"}
        interval = row["Interval"]
        if interval.startswith(("std_", "max_")):
            continue
        if not _TOD.match(row["tod"]) or not (interval.isdigit() or _AVERAGE.match(interval)):
            raise ToolOutputError(
                f"{path}: data row {row_number} is not a vdbench interval row "
                f"(tod {row['tod']!r}, Interval {interval!r})"
            )
        if current is None:
            current = FlatRun(name=row["Run"])
        elif row["Run"] != current.name:
            raise ToolOutputError(
                f"{path}: run {current.name!r} has no avg_ row before run {row['Run']!r} starts"
            )
        if _AVERAGE.match(interval):
            current.average = row
            runs.append(current)
            current = None
        else:
            current.intervals.append(row)
    if current is not None:
        raise ToolOutputError(
            f"{path}: truncated: run {current.name!r} has {len(current.intervals)} interval "
            "row(s) but no avg_ row"
        )
    if not runs:
        raise ToolOutputError(f"{path}: truncated: a header but no completed run")
    return kind, runs


def read_run_starts(folder: Path) -> list[RunStart] | None:
    """The ``Starting RD=`` lines of totals.html (else summary.html), or None without both."""
    for name in ("totals.html", "summary.html"):
        path = folder / name
        if path.is_file():
            return [_run_start(match) for match in _START.finditer(html_text(path))]
    return None


def _run_start(match: re.Match) -> RunStart:
    rest = match.group("rest")
    loops_match = _FOR_LOOPS.search(rest)
    loops = {}
    if loops_match:  # 'For loops: None' for a run without any: no loop named None
        for pair in loops_match.group("loops").split():
            key, equals, value = pair.partition("=")
            if equals:
                loops[key] = value
    elapsed = _ELAPSED.search(rest)
    return RunStart(
        name=match.group("name"), loops=loops, elapsed_s=int(elapsed.group(1)) if elapsed else None
    )


def read_histograms(folder: Path) -> list[dict] | None:
    """Per run (in file order): histogram title key -> [(low_ms, high_ms|None, count)]."""
    path = folder / "histogram.html"
    if not path.is_file():
        return None
    return [_histogram_section(body) for _, body in _run_sections(path)]


def _run_sections(path: Path) -> list[tuple[str, str]]:
    """(RD name, text up to the next run) of each ``Starting RD=`` line of a report."""
    sections = _START.split(html_text(path))
    # re.split with 2 groups: [preamble, name, rest, body, name, rest, body, ...]
    return [(sections[i], sections[i + 2]) for i in range(1, len(sections), 3)]


def _histogram_section(body: str) -> dict:
    histograms: dict = {}
    current = None
    for line in body.splitlines():
        title = line.strip()
        if title in _HISTOGRAM_TITLES:
            current = histograms.setdefault(_HISTOGRAM_TITLES[title], [])
            continue
        bucket = _BUCKET.match(line)
        if bucket and current is not None:
            low, high, count = bucket.groups()
            current.append(
                (float(low), None if high == "max" else float(high), int(count.replace(",", "")))
            )
    return histograms


def reported_hosts(folder: Path) -> list[str]:
    """Host names of the ``Link to HOST reports`` line of summary.html ([] without it)."""
    path = folder / "summary.html"
    if not path.is_file():
        return []
    match = _HOST_REPORTS.search(html_text(path))
    return _LINK_TEXT.findall(match.group(1)) if match else []


def host_systems(folder: Path) -> dict[str, str]:
    """hd name -> its system= (the host's address), from the parameter file vdbench copied
    into parmfile.html; {} without it. hd=default is left out."""
    path = folder / "parmfile.html"
    if not path.is_file():
        return {}
    systems = {}
    for match in _HD_LINE.finditer(html_text(path)):
        if match["name"] != "default":
            params = dict(part.split("=", 1) for part in match["rest"].split(",") if "=" in part)
            systems[match["name"]] = params.get("system", match["name"])
    return systems


def host_runs(folder: Path, hd: str, runs: list[Run]) -> list[Run] | None:
    """The master's runs as host ``hd`` did them, from its report ``<hd>.html`` (one table
    per RD, the columns of summary.html); None for a missing report or one whose runs differ.
    Its histogram report (``<hd>.histogram.html``; vdbench leaves a file-system run's empty)
    splits reads from writes as histogram.html does."""
    path = folder / f"{hd}.html"
    kinds = {run.kind for run in runs}
    if not path.is_file() or len(kinds) != 1:
        return None
    kind = kinds.pop()
    columns, optional = _HOST_COLUMNS[kind], _HOST_OPTIONAL_COLUMNS[kind]
    tables = [
        (name, _host_table(body, columns, f"{path}, run {name}", optional))
        for name, body in _run_sections(path)
        if not is_format_run(name)
    ]
    if [name for name, _ in tables] != [run.name for run in runs] or not all(
        average for _, (_, average) in tables
    ):
        return None
    histograms = _host_histograms(folder / f"{hd}.histogram.html", len(runs))
    return [
        replace(
            run,
            intervals=intervals,
            average={
                **{key: run.average[key] for key in _RUN_COLUMNS if key in run.average},
                **_average_span(average, intervals),
            },
            histograms=histogram,
        )
        for run, (_, (intervals, average)), histogram in zip(runs, tables, histograms, strict=True)
    ]


def _host_histograms(path: Path, runs: int) -> list[dict]:
    """Each measured run's histograms of a host's histogram report; {} each where it has
    none, or not one per run."""
    if not path.is_file():
        return [{}] * runs
    measured = [
        _histogram_section(body) for name, body in _run_sections(path) if not is_format_run(name)
    ]
    return measured if len(measured) == runs else [{}] * runs


def driven_host_runs(folder: Path, runs: list[Run]) -> list[tuple[str, list[Run]]]:
    """(system=, its runs) of every hd of a multi-host output folder, in hd order; [] when
    one host's report is missing or differs."""
    driven = []
    for hd, system in host_systems(folder).items():
        runs_of_host = host_runs(folder, hd, runs)
        if runs_of_host is None:
            return []
        driven.append((system, runs_of_host))
    return driven


def _host_table(
    body: str, columns: tuple[str, ...], where: str, optional: int = 0
) -> tuple[list[dict], dict]:
    """(interval rows, avg_ row) of one run's table in a host report, keyed as the flatfile's
    columns (and WHERE: the report, run and interval, for messages); the last ``optional``
    columns (a raw table's CPU) may be missing."""
    intervals, average = [], {}
    for line in body.splitlines():
        cells = line.split()
        if len(cells) < 2 + len(columns) - optional or not _TOD.match(cells[0]):
            continue
        values = zip(columns, cells[2 : 2 + len(columns)], strict=False)
        row = {"tod": cells[0], "Interval": cells[1], **dict(values)}
        row[WHERE] = f"{where}, interval {cells[1]}"
        if _AVERAGE.match(cells[1]):
            average = row
        elif cells[1].isdigit():
            intervals.append(row)
    return intervals, average


def parse_version(text: str) -> str | None:
    """'Vdbench distribution: vdbench50407 Tue June 05 ...' -> 'vdbench50407'."""
    match = _DISTRIBUTION.search(text or "")
    return match.group(1) if match else None


def tool_version(folder: Path) -> str | None:
    path = folder / "logfile.html"
    return parse_version(html_text(path)) if path.is_file() else None


def parmfile_fileio(folder: Path) -> str | None:
    """The one ``fileio`` (random or sequential) the parameter file's FWDs name, or None: an
    output folder copied from elsewhere has no params of ours to say whether a file system
    workload was random."""
    path = folder / "parmfile.html"
    if not path.is_file():
        return None
    found = set()
    for line in html_text(path).splitlines():
        if line.strip().lower().startswith("fwd="):
            found.update(re.findall(r"(?i)(?:^|,)\s*fileio=([a-z]+)", line.strip()))
    return found.pop().lower() if len(found) == 1 else None


def error_count(folder: Path) -> int | None:
    """0 when errorlog.html has no message after its header; None when it has (or is absent)."""
    path = folder / "errorlog.html"
    if not path.is_file():
        return None
    lines = html_text(path).splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith(_ERRORLOG_HEADER)), None)
    if header is None:
        return None
    return 0 if not any(line.strip() for line in lines[header + 1 :]) else None


# --- runs ----------------------------------------------------------------------------------


def is_format_run(name: str) -> bool:
    return name in FORMAT_RUN_NAMES or name.startswith(FORMAT_RUN_PREFIX)


def read_runs(flatfile: Path) -> list[Run]:
    """The measured runs (format runs skipped) of the flatfile and the reports next to it."""
    kind, flat_runs = read_flatfile(flatfile)
    folder = flatfile.parent
    starts = read_run_starts(folder)
    if starts is not None and [s.name for s in starts] != [r.name for r in flat_runs]:
        raise ToolOutputError(
            f"{flatfile}: its runs {[r.name for r in flat_runs]} do not match the "
            f"'Starting RD=' lines of {folder} ({[s.name for s in starts]}); truncated output?"
        )
    histograms = read_histograms(folder)
    if histograms is not None and len(histograms) != len(flat_runs):
        histograms = None  # an incomplete histogram.html: percentiles stay null
    if starts is None:
        starts = _starts_from_flatfile(kind, flat_runs)
    fallback_interval = _interval_seconds([row for run in flat_runs for row in run.intervals])
    runs = []
    for index, (flat, start) in enumerate(zip(flat_runs, starts, strict=True)):
        if is_format_run(flat.name):
            continue
        runs.append(
            Run(
                name=flat.name,
                label=run_label(flat.name, start.loops),
                kind=kind,
                loops=start.loops,
                elapsed_s=start.elapsed_s,
                intervals=flat.intervals,
                average=_average_span(flat.average, flat.intervals),
                interval_s=_interval_seconds(flat.intervals) or fallback_interval or 1.0,
                histograms=histograms[index] if histograms is not None else {},
            )
        )
    if not runs:
        raise ToolOutputError(f"{flatfile}: no measured run (only vdbench's format runs)")
    _make_labels_unique(runs)
    return runs


def _average_span(average: dict, intervals: list[dict]) -> dict:
    """A run's avg_ row, its label naming the intervals it really averages: vdbench 5.04.06
    prints ``avg_2-4`` over the mean of intervals 1-4 (a raw run's 1,059,335 I/O per s = the
    mean of 590,136, 1,077,448, 1,333,081 and 1,236,675; a file-system run's 833,643.25 ops
    per s the mean of 361,703, 973,677, 916,512 and 1,082,681; its histogram counts those four
    too), which reads as avg_1-4 here; 5.04.07's avg_2-4 is the mean of intervals 2-4. A
    host report's rates are rounded (192284 for 192,284.25): the means agree within what the
    printed digits allow."""
    match = _AVERAGE.match(average.get("Interval", ""))
    if match is None:
        return average
    first, last = map(int, match.groups())
    rates = {
        int(row["Interval"]): value
        for row in intervals
        if row["Interval"].isdigit() and (value := cell_value(row.get("rate"))) is not None
    }
    printed = cell_value(average.get("rate"))
    if printed is None or first <= 1 or sorted(rates) != list(range(1, last + 1)):
        return average
    rounding = _rounding(average["rate"]) + max(
        _rounding(row.get("rate") or "") for row in intervals if row["Interval"].isdigit()
    )

    def agrees(numbers: list[float]) -> bool:
        mean = sum(numbers) / len(numbers)
        return abs(mean - printed) <= max(0.01, 1e-6 * abs(mean), rounding)

    labelled = [rates[interval] for interval in range(first, last + 1)]
    if agrees(labelled) or not agrees(list(rates.values())):
        return average
    return {**average, "Interval": f"avg_1-{last}"}


def _rounding(cell: str) -> float:
    """Half a unit of the last digit a cell was printed with ('192284': 0.5, '64.0': 0.05)."""
    _, _, decimals = cell.partition(".")
    return 0.5 * 10.0 ** -len(decimals)


def run_label(name: str, loops: dict) -> str:
    """'rd1' + for-loop values: 'rd1_xfersize-4k_rdpct-70'."""
    parts = [name] + [f"{key}-{value}" for key, value in loops.items()]
    return "_".join(_UNSAFE.sub("-", part) for part in parts)


def _make_labels_unique(runs: list[Run]) -> None:
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.label] = counts.get(run.label, 0) + 1
    seen: dict[str, int] = {}
    for run in runs:
        if counts[run.label] > 1:
            seen[run.label] = seen.get(run.label, 0) + 1
            run.label = f"{run.label}_run{seen[run.label]}"


def _starts_from_flatfile(kind: str, flat_runs: list[FlatRun]) -> list[RunStart]:
    """Loop values of a lone flatfile: the raw requested columns that vary within an RD."""
    varying: dict[str, set[str]] = {}
    if kind == RAW:
        for name in {run.name for run in flat_runs}:
            rows = [run.average for run in flat_runs if run.name == name]
            varying[name] = {c for c in _RAW_LOOP_COLUMNS if len({row[c] for row in rows}) > 1}
    starts = []
    for run in flat_runs:
        columns = varying.get(run.name, set())
        loops = {
            column: _raw_loop_value(column, run.average[column])
            for column in _RAW_LOOP_COLUMNS
            if column in columns
        }
        starts.append(RunStart(name=run.name, loops=loops, elapsed_s=None))
    return starts


def _raw_loop_value(column: str, value: str) -> str:
    return size_label(int(value)) if column == "xfersize" and value.isdigit() else value


def _seconds_of_day(tod: str) -> float:
    hours, minutes, seconds = tod.split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def _interval_seconds(rows: list[dict]) -> float | None:
    """vdbench's interval= (whole seconds): the median spacing of consecutive interval rows."""
    times = [_seconds_of_day(row["tod"]) for row in rows]
    gaps = [(b - a) % 86400 for a, b in zip(times, times[1:], strict=False)]
    if not gaps:
        return None
    return float(max(1, round(statistics.median(gaps))))


def averaged_intervals(average: dict) -> int:
    match = _AVERAGE.match(average["Interval"])
    if match is None:
        raise ToolOutputError(f"not a vdbench avg_ row: Interval {average['Interval']!r}")
    first, last = map(int, match.groups())
    return max(0, last - first + 1)


# --- numbers -------------------------------------------------------------------------------


def cell_value(value) -> float | None:
    """A flatfile cell as float; None for 'n/a', 'NaN' and missing cells."""
    if value is None:
        return None
    try:
        result = float(value)
    except ValueError:
        return None
    return None if math.isnan(result) else result


def op_rates(kind: str, row: dict) -> dict[str, OpRates]:
    """The ops a flatfile row did (rate > 0) and their rates."""
    if kind == RAW:
        return _raw_op_rates(row)
    return _filesystem_op_rates(row)


def _raw_op_rates(row: dict) -> dict[str, OpRates]:
    rate = _rate(row, "rate")
    read_fraction = _read_percent(row) / 100.0 if rate > 0 else 0.0
    bytes_per_io = cell_value(row["bytes/io"])
    rates = {}
    for op, fraction in (("read", read_fraction), ("write", 1.0 - read_fraction)):
        iops = rate * fraction
        if iops <= 0:
            continue
        rates[op] = OpRates(
            iops=iops,
            bw_bytes_s=iops * bytes_per_io if bytes_per_io is not None else None,
            bytes_per_io=bytes_per_io,
            mean_ms=cell_value(row[f"{op}_resp"]),
            max_ms=_op_stat(row, op, "max", fraction),
            stdev_ms=_op_stat(row, op, "std", fraction),
        )
    return rates


def _rate(row: dict, column: str) -> float:
    """A rate cell: a number >= 0 (0 where the row has no such column); a NaN, n/a or negative
    rate would drop its operation, so it is an error naming the file and line."""
    text = row.get(column)
    if text is None:
        return 0.0
    value = cell_value(text)
    if value is None or not 0 <= value < math.inf:
        raise ToolOutputError(
            f"{row.get(WHERE, 'vdbench output')}: {column} is {text!r}, not a number >= 0 "
            f"(run {row.get('Run')})"
        )
    return value


def _read_percent(row: dict) -> float:
    """read% of a row that did I/O: 0 to 100 (NaN would label every I/O a write)."""
    text = row["read%"]
    value = cell_value(text)
    if value is None or not 0 <= value <= 100:
        raise ToolOutputError(
            f"{row.get(WHERE, 'vdbench output')}: read% is {text!r}, not a number from 0 to "
            f"100 (run {row.get('Run')}, rate {row.get('rate')})"
        )
    return value


def _op_stat(row: dict, op: str, stat: str, fraction: float) -> float | None:
    """An op's max or std response time: its own column (vdbench 5.04.07), else, before
    5.04.07's read_max ... write_std, the all-ops resp_max/resp_std where every I/O was op."""
    if f"{op}_{stat}" in row:
        return cell_value(row[f"{op}_{stat}"])
    return cell_value(row.get(f"resp_{stat}")) if fraction == 1.0 else None


def _filesystem_op_rates(row: dict) -> dict[str, OpRates]:
    rates = {}
    for prefix, op, megabytes in (("Read", "read", "MB_read"), ("Write", "write", "MB_write")):
        iops = _rate(row, f"{prefix}_rate")
        if iops > 0:
            bandwidth = cell_value(row[megabytes])
            rates[op] = OpRates(
                iops=iops,
                bw_bytes_s=bandwidth * MIB if bandwidth is not None else None,
                bytes_per_io=None,
                **_filesystem_latency(row, prefix),
            )
    for prefix, op in _FILESYSTEM_METADATA_OPS.items():
        iops = _rate(row, f"{prefix}_rate")
        if iops > 0:
            rates[op] = OpRates(
                iops=iops, bw_bytes_s=None, bytes_per_io=None, **_filesystem_latency(row, prefix)
            )
    return rates


def _filesystem_latency(row: dict, prefix: str) -> dict:
    return {
        "mean_ms": cell_value(row[f"{prefix}_resp"]),
        "max_ms": cell_value(row.get(f"{prefix}_resp_max")),
        "stdev_ms": cell_value(row.get(f"{prefix}_resp_std")),
    }


def _ns(ms: float | None) -> float | None:
    return None if ms is None else round(ms * NS_PER_MS, 3)  # 8.062 ms, not 8061999.999... ns


def histogram_bins(buckets: list, max_ms: float | None) -> tuple[list[int], list[int]]:
    """Upper bounds (ns) and counts; the open last bucket is bounded by the op's maximum."""
    values, counts = [], []
    for low, high, count in buckets:
        if high is None:
            high = max(low, max_ms or low)
        values.append(round(high * NS_PER_MS))
        counts.append(count)
    return values, counts


def _op_histogram(run: Run, op: str, ops: dict) -> list | None:
    if op in run.histograms:
        return run.histograms[op]
    if "total" in run.histograms and len(ops) == 1:
        return run.histograms["total"]
    return None


def _counts_agree(histogram_total: int, ios_from_rates: float) -> bool:
    return abs(histogram_total - ios_from_rates) <= max(2.0, 0.001 * histogram_total)


# --- result rows ---------------------------------------------------------------------------


def result_rows(
    runs: list[Run],
    *,
    host: str,
    base: dict,
    folder: Path,
    with_errors: bool = True,
    facts: FolderFacts | None = None,
) -> list[dict]:
    """Rows of every measured run and op for one host (no 'all' rows); ``with_errors``: the
    folder's error count in the rows (a multi-host run's: in its 'all' rows only)."""
    return hosts_result_rows(
        [(host, runs)], base=base, folder=folder, with_errors=with_errors, facts=facts
    )


def hosts_result_rows(
    hosts: list[tuple[str, list[Run]]],
    *,
    base: dict,
    folder: Path,
    with_errors: bool = True,
    facts: FolderFacts | None = None,
) -> list[dict]:
    """``result_rows`` of several (host, its runs) of one output folder, its files read once
    (``facts``: read already, for the folder's other runs)."""
    inherited = {key: value for key, value in base.items() if key in _schema_columns()}
    base_params = _base_params(base)
    written_fileio, version, error_total = facts or folder_facts(folder)
    errors = error_total if with_errors else None
    rows = []
    for host, runs in hosts:
        for run in runs:
            parameters, point = run_parameters(run, base_params, written_fileio)
            shared = {
                **inherited,
                **parameters,
                "params_json": json.dumps({**base_params, **point}, sort_keys=True, default=str),
                "host": host,
                "job": run.label,
                "errors": errors,
                **run_cpu(run.average),
            }
            if version is not None:
                shared["tool_version"] = version
            duration = averaged_intervals(run.average) * run.interval_s
            ops = op_rates(run.kind, run.average)
            for op, rates in ops.items():
                metrics = _op_metrics(rates, duration, _op_histogram(run, op, ops))
                rows.append({**shared, "op": op, **metrics})
    return rows


def run_cpu(average: dict) -> dict:
    """A run's CPU columns from its avg row (the module's docstring): user + kernel where the
    row has both (a flatfile), else cpu_used (a host report's sys+u)."""
    user, kernel = _cpu_cell(average, "cpu_user"), _cpu_cell(average, "cpu_kernel")
    used = user + kernel if user is not None and kernel is not None else None
    if used is None:
        used = _cpu_cell(average, "cpu_used")
    if used is None:
        return {}
    return {"cpu_pct": used, "cpu_sys_pct": kernel, "cpu_basis": CPU_HOST}


def _cpu_cell(row: dict, column: str) -> float | None:
    value = cell_value(row.get(column))
    return value if value is not None and 0 <= value < math.inf else None


FolderFacts = tuple  # (the parameter file's fileio, the tool's version, the error count)


def folder_facts(folder: Path) -> FolderFacts:
    """What every row of an output folder shares, read from its parmfile, logfile and
    errorlog: an import reads them once per folder, not once per run."""
    return parmfile_fileio(folder), tool_version(folder), error_count(folder)


def _base_params(base: dict) -> dict:
    try:
        params = json.loads(base.get("params_json") or "{}")
    except ValueError:
        return {}
    return params if isinstance(params, dict) else {}


def _op_metrics(rates: OpRates, duration: float, buckets: list | None) -> dict:
    ios_from_rates = rates.iops * duration
    percentiles = {**no_percentiles(), "lat_basis": "lat"}
    ios = round(ios_from_rates)
    if buckets:
        values, counts = histogram_bins(buckets, rates.max_ms)
        if _counts_agree(sum(counts), ios_from_rates):
            ios = sum(counts)
            percentiles = histogram_percentiles(values, counts, "lat")
    if rates.bytes_per_io is not None:
        transferred = round(ios * rates.bytes_per_io)
    elif rates.bw_bytes_s is not None:
        transferred = round(rates.bw_bytes_s * duration)
    else:
        transferred = None
    return {
        "bytes": transferred,
        "ios": ios,
        "duration_s": duration,
        "bw_bytes_s": rates.bw_bytes_s,
        "iops": rates.iops,
        "lat_mean_ns": _ns(rates.mean_ms),
        "lat_stdev_ns": _ns(rates.stdev_ms),
        "lat_min_ns": None,
        "lat_max_ns": _ns(rates.max_ms),
        **percentiles,
    }


def run_parameters(run: Run, params: dict, written_fileio: str | None = None) -> tuple[dict, dict]:
    """(parameter columns, loop point in storbench names) of one run; ``written_fileio``: the
    parameter file's FWD fileio, for an output folder that came without our params."""
    loops = run.loops
    average = run.average
    names = {**LOOP_PARAMETERS, "threads": "iodepth" if run.kind == RAW else "numjobs"}
    point = {names.get(key, key): _loop_value(value) for key, value in loops.items()}
    raw = run.kind == RAW
    bs = _first_parsed(
        parse_size,
        loops.get("xfersize"),
        average.get("xfersize") if raw else None,
        params.get("bs"),
        average.get("Xfersize"),
    )
    rdpct = _first_parsed(
        _percent,
        loops.get("rdpct"),
        average.get("rdpct") if raw else None,
        _requested_rdpct(params),
    )
    if raw:  # the SD's threads are its outstanding I/Os
        iodepth = _first_parsed(
            int, loops.get("threads"), average["threads"], params.get("iodepth")
        )
        numjobs = _first_parsed(int, params.get("numjobs"))
    else:  # an FWD's threads each do one operation at a time (rendered from numjobs/iodepth)
        iodepth = _first_parsed(int, params.get("iodepth"))
        numjobs = _first_parsed(
            int, loops.get("threads"), params.get("numjobs"), params.get("iodepth")
        )
    random = _is_random(loops.get("seekpct") or (average.get("seekpct") if raw else None), params)
    if random is None and written_fileio:  # an output folder without our params
        random = _is_random(None, {"fileio": written_fileio})
    parameters = {
        "rw": _rw(rdpct, random) or params.get("rw"),
        "bs": bs,
        "rwmixread": rdpct,
        "size": _first_parsed(parse_size, params.get("size"))
        or (_lun_bytes(average.get("lunsize")) if raw else None),
        "runtime_s": run.elapsed_s
        if run.elapsed_s is not None
        else _first_parsed(parse_duration, params.get("runtime")),
        "iodepth": iodepth,
        "numjobs": numjobs,
    }
    if parameters["runtime_s"] is not None:
        parameters["runtime_s"] = float(parameters["runtime_s"])
    if params.get("rw") not in (None, parameters["rw"]):  # a forrdpct/forseekpct run
        point["rw"] = parameters["rw"]
    return parameters, point


def _loop_value(value: str):
    """'70' -> 70 as in a sweep; '4k', 'max', '0.5' stay text."""
    return int(value) if re.fullmatch(r"-?\d+", value) else value


def _percent(value) -> int:
    result = float(value)
    if not 0 <= result <= 100:
        raise ValueError(value)
    return round(result)


def _first_parsed(parse, *candidates):
    for value in candidates:
        if value is None or value == "n/a":
            continue
        try:
            return parse(value)
        except (UnitError, ValueError, TypeError):
            continue
    return None


def _requested_rdpct(params: dict) -> int | None:
    rw = str(params.get("rw", ""))
    if rw in ("read", "randread"):
        return 100
    if rw in ("write", "randwrite"):
        return 0
    if "rwmixread" in params:
        return _first_parsed(_percent, params["rwmixread"])
    return 50 if rw in ("rw", "readwrite", "randrw") else None


def _is_random(seekpct, params: dict) -> bool | None:
    if seekpct not in (None, "", "n/a"):
        text = str(seekpct).lower()
        if text in ("eof", "-1") or "sequential".startswith(text):
            return False
        if "random".startswith(text):
            return True
        value = cell_value(text)
        return None if value is None else value > 0
    if "fileio" in params:
        return str(params["fileio"]).lower().startswith("random")
    if "seekpct" in params:
        return _is_random(params["seekpct"], {})
    rw = params.get("rw")
    return None if rw is None else str(rw).startswith("rand")


def _rw(rdpct: int | None, random: bool | None) -> str | None:
    if rdpct is None or random is None:
        return None
    direction = {100: "read", 0: "write"}.get(rdpct, "rw")
    return f"rand{direction}" if random else direction


def _lun_bytes(gigabytes) -> int | None:
    value = cell_value(gigabytes)
    return round(value * 1024**3) if value else None


# --- time series ---------------------------------------------------------------------------


def timeseries_rows(runs: list[Run], *, host: str, base: dict, source: Path) -> list[dict]:
    """One row per interval row (warm-up included) and op of every measured run."""
    inherited = {key: value for key, value in base.items() if key in _timeseries_columns()}
    rows = []
    for run in runs:
        ops = set(op_rates(run.kind, run.average))
        for row in run.intervals:
            interval = int(row["Interval"])
            for op, rates in op_rates(run.kind, row).items():
                if op not in ops:
                    continue
                rows.append(
                    {
                        **inherited,
                        "host": host,
                        "job": run.label,
                        "op": op,
                        "t_s": interval * run.interval_s,
                        "interval_s": run.interval_s,
                        "bytes": round(rates.bw_bytes_s * run.interval_s)
                        if rates.bw_bytes_s is not None
                        else None,
                        "ios": round(rates.iops * run.interval_s),
                        "bw_bytes_s": rates.bw_bytes_s,
                        "iops": rates.iops,
                        "lat_mean_ns": _ns(rates.mean_ms),
                        "errors": None,
                        "timestamp": interval_timestamp(row),
                        "source": str(source),
                    }
                )
    return rows


def interval_timestamp(row: dict) -> str | None:
    """ISO 8601 UTC of the row's tod (ms), dated by its timestamp column; None unless UTC."""
    match = _FLATFILE_TIMESTAMP.match(row.get("timestamp", ""))
    if not match or match.group(7) not in ("UTC", "GMT"):
        return None
    month, day, year, hour, minute, second = map(int, match.groups()[:6])
    stamped = datetime.datetime(year, month, day, hour, minute, second, tzinfo=datetime.UTC)
    seconds = _seconds_of_day(row["tod"])
    midnight = stamped.replace(hour=0, minute=0, second=0)
    candidates = [
        midnight + datetime.timedelta(days=shift, seconds=seconds) for shift in (-1, 0, 1)
    ]
    closest = min(candidates, key=lambda moment: abs((moment - stamped).total_seconds()))
    return closest.isoformat(timespec="milliseconds")
