"""elbencho's result files (3.1-10; tests/fixtures/elbencho/README.md) -> result rows.

elbencho appends one record per finished phase to each result file it is given, in the same
order, so a result folder holds the same phase sequence three times:

* ``results.json`` (``--jsonfile``, NDJSON, every value a string): exact bytes and bytes/s,
  latency min/avg/max in us and, with ``--lathisto``, the latency histogram. Primary source.
* ``results.csv`` (``--csvfile``): the same numbers, but MiB and MiB/s as whole MiB; its
  ``command`` field is not CSV-quoted (commas replaced by spaces), so a row is split on the
  first len(header)-1 commas. It has the I/O latency even without ``--lat``.
* ``results.txt`` (``--resfile``): the only source of the printed percentiles
  (``--latpercent``: 1, 50, 75, 99 and, with ``--latpercent9s``, 99.9, 99.99 ...).

:func:`read_folder` reads whichever of the three exist, checks that they list the same phases,
and fills every value the primary file lacks from the next one (JSON, then CSV, then text).
A file with a header but no phase (elbencho failed before the first phase ended) is not a
result: :class:`ToolOutputError` "no completed phase".

Rows (:func:`parse_run`, :func:`import_paths`): one per phase and op at LAST DONE (all workers
finished); rwmix phases give a write and a read row. Data phases use the I/O (block) latency,
metadata phases (mkdir, rmdir, delete, stat, list) count entries as ios. Percentiles come from
the histogram when elbencho printed one, else as printed (p90 is never printed). Time series
(:func:`parse_run_timeseries`) come from ``live.csv``.

CPU (``cpu_pct``, basis ``host``): the phase's LAST DONE ``cpu%`` (JSON), ``CPU% [last]``
(CSV) or ``CPU util %`` (text, a service's log with ``--cpu``): elbencho's /proc/stat busy
time (all but idle and iowait) of every CPU of the host, from the phase's start to its last
worker's end, on each of the phase's rows; no user/system split (``cpu_sys_pct`` null). A
service-mode total is elbencho's mean over its services. elbencho prints 0 for a phase
shorter than one /proc/stat tick (10 ms): that 0 stays null.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from storbench.core.aggregate import (
    LATENCY_SUMMARY,
    aggregate_hosts,
    histogram_percentiles,
    no_percentiles,
)
from storbench.core.numbers import MIB
from storbench.core.schema_names import ALL_HOSTS, CPU_HOST, PERCENTILE_COLUMNS, PERCENTILES
from storbench.core.specs import Manifest
from storbench.core.units import parse_duration, parse_size
from storbench.tools.base import ToolOutputError
from storbench.tools.base import result_columns as _schema_columns
from storbench.tools.base import timeseries_columns as _timeseries_columns

RESULT_FILES = ("results.json", "results.csv", "results.txt")  # in order of precedence
LIVE_FILE = "live.csv"

CSV_HEADER_START = "ISO date,label,path type,"
LIVE_HEADER_START = "ISO Date,Label,Phase,RuntimeMS,Rank,"
TEXT_TABLE_HEADER = "OPERATION"


@dataclass
class Measures:
    """One direction of a phase at LAST DONE (all workers finished): the phase, or rwmix reads."""

    elapsed_ms: float | None = None
    entries: int | None = None
    entries_per_s: float | None = None
    iops: float | None = None
    bytes: int | None = None
    bytes_per_s: float | None = None
    entry_latency_us: tuple | None = None  # (min, avg, max)
    io_latency_us: tuple | None = None
    entry_percentiles_us: dict | None = None  # {50.0: 256.0, 99.0: 609.0}
    io_percentiles_us: dict | None = None
    entry_histogram_us: tuple | None = None  # ([bucket upper bounds], [counts])
    io_histogram_us: tuple | None = None

    def is_empty(self) -> bool:
        return self.bytes is None and self.entries is None and self.iops is None


@dataclass
class Phase:
    name: str  # elbencho's phase name: WRITE, READ, MKDIRS, RWMIX70, HEADOBJ ...
    source: str
    label: str | None = None
    start: str | None = None
    version: str | None = None
    command: str | None = None
    path_type: str | None = None  # dir, file, blockdev, bucket, object
    hosts: int | None = None  # number of services in service mode, else 1
    threads: int | None = None  # per host
    block_size: int | None = None
    file_size: int | None = None
    io_depth: int | None = None
    random: bool | None = None
    cpu_pct: float | None = None  # LAST DONE CPU util % of the host (all CPUs), whole phase
    main: Measures = field(default_factory=Measures)
    rwmix_read: Measures = field(default_factory=Measures)


# --- folders -------------------------------------------------------------------------------


def read_folder(folder: Path) -> list[Phase]:
    """Phases of an elbencho result folder, every value taken from the best file that has it."""
    readers = {"results.json": read_json, "results.csv": read_csv, "results.txt": read_text}
    present = [folder / name for name in RESULT_FILES if (folder / name).is_file()]
    if not present:
        raise ToolOutputError(f"{folder}: no elbencho result file ({', '.join(RESULT_FILES)})")
    sources = [(path, readers[path.name](path)) for path in present]
    primary_path, phases = sources[0]
    for path, others in sources[1:]:
        _check_same_phases(primary_path, phases, path, others)
        for phase, other in zip(phases, others, strict=True):
            _fill_missing(phase, other)
    return phases


def read_file(path: Path) -> list[Phase]:
    """Phases of one result file, recognised by its content (JSON lines, CSV or text)."""
    first = _first_line(path)
    if first.startswith("{"):
        return read_json(path)
    if first.startswith(CSV_HEADER_START):
        return read_csv(path)
    if first.startswith(("ISO DATE:", TEXT_TABLE_HEADER)):
        return read_text(path)
    if first.startswith(LIVE_HEADER_START):
        raise ToolOutputError(f"{path}: an elbencho live CSV (--livecsv), not a result file")
    raise ToolOutputError(f"{path}: not an elbencho result file (first line: {first[:80]!r})")


def _first_line(path: Path) -> str:
    for line in _lines(path):
        if line.strip():
            return line.strip()
    raise ToolOutputError(f"{path}: file is empty")


def _lines(path: Path) -> list[str]:
    return path.read_bytes().decode("utf-8", errors="replace").splitlines()


def _check_same_phases(path_a: Path, phases_a: list, path_b: Path, phases_b: list) -> None:
    names_a = [phase.name for phase in phases_a]
    names_b = [phase.name for phase in phases_b]
    if names_a != names_b:
        raise ToolOutputError(
            f"{path_b}: lists phases {names_b}, but {path_a.name} lists {names_a} "
            "(files of different runs in one folder?)"
        )


def _fill_missing(target, source) -> None:
    """Set every None field of target (a Phase or Measures) from source, recursively."""
    for item in dataclasses.fields(target):
        mine, theirs = getattr(target, item.name), getattr(source, item.name)
        if isinstance(mine, Measures):
            _fill_missing(mine, theirs)
        elif mine is None and theirs is not None:
            setattr(target, item.name, theirs)


def _no_phase(path: Path) -> ToolOutputError:
    return ToolOutputError(f"{path}: no completed phase (elbencho failed before a phase ended)")


# --- JSON (--jsonfile) -----------------------------------------------------------------------


def read_json(path: Path) -> list[Phase]:
    phases: list[Phase] = []
    for number, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            problem = "truncated?" if phases else "not elbencho's one object per line"
            raise ToolOutputError(f"{path}:{number}: {error.msg} ({problem})") from None
        if not isinstance(record, dict) or "phase_type" not in record:
            raise ToolOutputError(f"{path}:{number}: not an elbencho result (no 'phase_type')")
        try:
            phases.append(_json_phase(record, str(path)))
        except (ValueError, TypeError, AttributeError) as error:
            raise ToolOutputError(f"{path}:{number}: unexpected value ({error})") from None
    if not phases:
        raise _no_phase(path) if path.stat().st_size else ToolOutputError(f"{path}: file is empty")
    return phases


def _json_phase(record: dict, source: str) -> Phase:
    config = record.get("config") or {}
    last = record.get("last_done") or {}
    latency = last.get("latency") or {}
    return Phase(
        name=record["phase_type"],
        source=source,
        label=record.get("label") or None,
        start=record.get("iso_start_date"),
        version=config.get("version"),
        command=_command(config.get("command")),
        path_type=config.get("path_type"),
        hosts=_int(config.get("hosts")),
        threads=_int(config.get("threads")),
        block_size=_int(config.get("block_size")),
        file_size=_int(config.get("file_size")),
        io_depth=_int(config.get("io_depth")),
        random=_bool(config.get("random_offsets")),
        cpu_pct=_float(last.get("cpu%")),
        main=_json_measures(last, latency, last.get("elapsed_time_ms"), read_mix=False),
        rwmix_read=_json_measures(
            last.get("rwmix_read") or {}, latency, last.get("elapsed_time_ms"), read_mix=True
        ),
    )


def _json_measures(done: dict, latency: dict, elapsed_ms, *, read_mix: bool) -> Measures:
    def lat(kind: str):
        subtree = latency.get(kind) or {}
        return (subtree.get("rwmix_read") or {}) if read_mix else subtree

    def histogram(kind: str):
        subtree = (latency.get(kind) or {}).get("histogram") or {}
        return _json_histogram((subtree.get("rwmix_read") or {}) if read_mix else subtree)

    measures = Measures(
        entries=_int(done.get("entries")),
        entries_per_s=_float(done.get("entries/s")),
        iops=_float(done.get("iops")),
        bytes=_int(done.get("bytes")),
        bytes_per_s=_float(done.get("bytes/s")),
        entry_latency_us=_json_latency(lat("entries")),
        io_latency_us=_json_latency(lat("IO")),
        entry_histogram_us=histogram("entries"),
        io_histogram_us=histogram("IO"),
    )
    if not measures.is_empty():
        measures.elapsed_ms = _float(elapsed_ms)
    return measures


def _json_latency(subtree: dict):
    values = tuple(_float(subtree.get(key)) for key in ("min_us", "avg_us", "max_us"))
    return None if None in values else values


_JSON_RANGE = re.compile(r"^\s*[\d.]+-(?P<upper>[\d.]+)us\s*$")


def _json_histogram(subtree: dict):
    buckets = subtree.get("buckets")
    if not buckets:  # also when elbencho wrote histo_max_exceeded instead
        return None
    uppers, counts = [], []
    for bucket in buckets:
        match = _JSON_RANGE.match(str(bucket.get("range", "")))
        if not match:
            raise ToolOutputError(f"unexpected histogram bucket {bucket!r}")
        uppers.append(float(match["upper"]))
        counts.append(int(bucket["count"]))
    return uppers, counts


# --- CSV (--csvfile) -------------------------------------------------------------------------


# The measures of a phase: a CSV without one of these columns is refused, not read as empty.
CSV_REQUIRED_COLUMNS = (
    "operation",
    "time ms [last]",
    "entries [last]",
    "IOPS [last]",
    "MiB [last]",
    "MiB/s [last]",
)


def read_csv(path: Path) -> list[Phase]:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ToolOutputError(
            f"{path}: not UTF-8 text (byte {error.start}), not an elbencho result CSV "
            "(binary data, or text in another encoding such as UTF-16)"
        ) from None
    if "\0" in text:
        raise ToolOutputError(
            f"{path}: holds NUL characters (binary data or UTF-16 text), not an elbencho result CSV"
        )
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise ToolOutputError(f"{path}: file is empty")
    if not text.endswith("\n") or lines[-1].count('"') % 2:
        # elbencho ends every line; a cut inside the quoted path would still split into fields
        raise ToolOutputError(
            f"{path}:{len(text.splitlines())}: truncated: the last line ends without its "
            "newline (the file was cut while being written or copied)"
        )
    if not lines[0].startswith(CSV_HEADER_START):
        raise ToolOutputError(f"{path}: not an elbencho result CSV (no '{CSV_HEADER_START}...')")
    header = lines[0].split(",")
    missing = [column for column in CSV_REQUIRED_COLUMNS if column not in header]
    if missing:
        raise ToolOutputError(
            f"{path}:1: the header lacks column(s) {', '.join(map(repr, missing))} "
            "(not elbencho's result CSV as storbench reads it)"
        )
    phases = []
    for number, line in enumerate(lines[1:], start=2):
        if line.startswith(CSV_HEADER_START):
            continue  # a header elbencho repeats only if the file was emptied in between
        values = line.split(",", len(header) - 1)  # the last field (command) is not quoted
        if len(values) != len(header):
            raise ToolOutputError(
                f"{path}:{number}: {len(values)} fields, header has {len(header)} (truncated?)"
            )
        try:
            phases.append(_csv_phase(dict(zip(header, values, strict=True)), str(path)))
        except (ValueError, KeyError) as error:
            raise ToolOutputError(f"{path}:{number}: unexpected value ({error})") from None
    if not phases:
        raise _no_phase(path)
    return phases


def _csv_phase(row: dict, source: str) -> Phase:
    return Phase(
        name=row["operation"],
        source=source,
        label=row.get("label") or None,
        start=row.get("ISO date") or None,
        version=row.get("version") or None,
        command=_command(row.get("command")),
        path_type=row.get("path type") or None,
        hosts=_int(row.get("hosts")),
        threads=_int(row.get("threads")),
        block_size=_int(row.get("block size")),
        file_size=_int(row.get("file size")),
        io_depth=_int(row.get("IO depth")),
        random=_bool(row.get("random")),
        cpu_pct=_float(row.get("CPU% [last]") or None),
        main=_csv_measures(row, "", row.get("time ms [last]")),
        rwmix_read=_csv_measures(row, "rwmix read ", row.get("time ms [last]")),
    )


def _csv_measures(row: dict, prefix: str, elapsed_ms) -> Measures:
    def value(name: str):
        return row.get(prefix + name) or None

    def latency(kind: str):
        values = tuple(_float(value(f"{kind} lat us [{stat}]")) for stat in ("min", "avg", "max"))
        return None if None in values else values

    mib = _int(value("MiB [last]"))
    mib_per_s = _float(value("MiB/s [last]"))
    measures = Measures(
        entries=_int(value("entries [last]")),
        entries_per_s=_float(value("entries/s [last]")),
        iops=_float(value("IOPS [last]")),
        bytes=None if mib is None else mib * MIB,
        bytes_per_s=None if mib_per_s is None else mib_per_s * MIB,
        entry_latency_us=latency("Ent"),
        io_latency_us=latency("IO"),
    )
    if not measures.is_empty():
        measures.elapsed_ms = _float(elapsed_ms)
    return measures


# --- text (--resfile, console) ---------------------------------------------------------------

_TEXT_LINE = re.compile(r"^(?P<phase>[A-Z][A-Z0-9_+-]*)?\s+(?P<label>[^:]+?)\s*:\s*(?P<value>.*)$")
_ENTRY_TYPES = ("Files", "Dirs", "Objects", "Buckets")
_DIRECTION = re.compile(r" (?:write|read|wr|rd)\b")
_PERCENTILE = re.compile(r"(?P<p>[\d.]+)%<=(?P<us>[\d.]+)")
_HISTOGRAM_BUCKET = re.compile(r"(?P<upper>[\d.]+):\s*(?P<count>\d+)")
_LATENCY = re.compile(r"min=(?P<min>\S+)\s+avg=(?P<avg>\S+)\s+max=(?P<max>\S+)")
_HUMAN_LATENCY = re.compile(r"^(?P<number>[\d.]+)(?P<unit>us|ms|s)$")
_HUMAN_ELAPSED = re.compile(
    r"^(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m(?!s))?(?:(?P<s>[\d.]+)s)?(?:(?P<ms>\d+)ms)?$"
)
_US_PER_UNIT = {"us": 1, "ms": 1000, "s": 1000_000}


def read_text(path: Path) -> list[Phase]:
    """Phases of a result text file (or elbencho's console output)."""
    phases: list[Phase] = []
    header: dict[str, str | None] = {"label": None, "start": None, "command": None}
    phase = None
    entry_type = None
    saw_table = False
    for number, line in enumerate(_lines(path), start=1):
        if phase is None and line.startswith(("ISO DATE:", "LABEL:", "COMMAND LINE:")):
            key, text = line.split(":", 1)
            if key == "ISO DATE":  # a new invocation appended to the file
                header = {"label": None, "start": text.strip(), "command": None}
            elif key == "LABEL":
                header["label"] = text.strip() or None
            else:
                header["command"] = _command(text)
            continue
        saw_table = saw_table or line.startswith(TEXT_TABLE_HEADER)
        if line.strip() == "---":
            if phase is not None:
                if not phase.rwmix_read.is_empty():
                    phase.rwmix_read.elapsed_ms = phase.main.elapsed_ms
                phases.append(phase)
            phase = None
            continue
        match = _TEXT_LINE.match(line)
        if not match:
            continue  # headers, NOTE:/WARNING: lines, blank lines
        if match["phase"]:
            if phase is not None:
                raise ToolOutputError(f"{path}: phase {phase.name} has no closing '---'")
            phase = Phase(
                name=match["phase"],
                source=str(path),
                label=header["label"],
                start=header["start"],
                command=header["command"],
                **settings_from_command(header["command"]),
            )
            entry_type = None
        if phase is None:
            continue
        try:
            entry_type = _text_value(phase, match["label"], match["value"], entry_type)
        except ValueError as error:  # also ToolOutputError: name the file and line
            raise ToolOutputError(f"{path}:{number}: {error}") from None
    if phase is not None:
        raise ToolOutputError(f"{path}: phase {phase.name} has no closing '---' (truncated?)")
    if not phases:
        _first_line(path)  # raises for an empty file
        if not saw_table:
            raise ToolOutputError(f"{path}: not an elbencho result text (no result table)")
        raise _no_phase(path)
    return phases


def _text_value(phase: Phase, label: str, value: str, entry_type):
    """Store one 'label : value' line of a phase block; returns the phase's entry type.

    rwmix phases print 'IOPS write' / 'IOPS read' / 'IOPS total', 'IO wr latency' /
    'IO rd latency' ...: 'read'/'rd' lines belong to the reads, the sums ('total') are skipped
    except 'Files total', which is the phase's own count.
    """
    tokens = value.split()
    last = tokens[-1] if tokens else ""
    reads = label.endswith(" read") or " rd " in f" {label} "
    measures = phase.rwmix_read if reads else phase.main
    name = _DIRECTION.sub("", label)
    subject = name.split()[0].split("/")[0]
    if name == "Elapsed time":
        phase.main.elapsed_ms = _elapsed_ms(last)
    elif name == "CPU util %":
        phase.cpu_pct = float(last)
    elif name == "IOPS":
        measures.iops = float(last)
    elif name in ("Throughput MiB/s", "MiB/s"):
        measures.bytes_per_s = float(last) * MIB
    elif name in ("Throughput MB/s", "MB/s"):  # --base10
        measures.bytes_per_s = float(last) * 1e6
    elif name in ("Total MiB", "MiB"):
        measures.bytes = int(last) * MIB
    elif subject in _ENTRY_TYPES and name == f"{subject}/s":
        entry_type = entry_type or subject  # later other types: --dirstats extras
        if subject == entry_type:
            measures.entries_per_s = float(last)
    elif subject in _ENTRY_TYPES and name in (subject, f"{subject} total"):
        if subject == entry_type:
            measures.entries = int(last)
    elif subject == "IO" or subject == entry_type:
        kind = "io" if subject == "IO" else "entry"
        if name.endswith(" latency"):
            setattr(measures, f"{kind}_latency_us", _text_latency(value))
        elif name.endswith(" lat % us"):
            setattr(measures, f"{kind}_percentiles_us", _text_percentiles(value))
        elif name.endswith(" lat hist"):
            setattr(measures, f"{kind}_histogram_us", _text_histogram(value))
    return entry_type


_COMMAND_SETTINGS: dict[
    str, tuple[str, Callable[[str], int]]
] = {  # option -> (Phase field, parser)
    "-t": ("threads", int),
    "--threads": ("threads", int),
    "-b": ("block_size", parse_size),
    "--block": ("block_size", parse_size),
    "-s": ("file_size", parse_size),
    "--size": ("file_size", parse_size),
    "--iodepth": ("io_depth", int),
}


def settings_from_command(command) -> dict:
    """Settings the text file lacks, from its COMMAND LINE (options in a -c file stay unknown)."""
    args = re.findall(r'"([^"]*)"', command or "")
    settings: dict = {"random": True} if "--rand" in args else {}
    for option, value in zip(args, args[1:], strict=False):
        if option == "--hosts":
            settings["hosts"] = len(re.split(r"[\s,]+", value.strip()))
        elif option in _COMMAND_SETTINGS:
            name, parse = _COMMAND_SETTINGS[option]
            with contextlib.suppress(ValueError):  # UnitError is a ValueError
                settings[name] = parse(value)
    return settings


def _elapsed_ms(text: str) -> float:
    match = _HUMAN_ELAPSED.match(text)
    if not text or not match:
        raise ToolOutputError(f"unexpected elapsed time {text!r}")
    hours, minutes, seconds, millis = (float(match[key] or 0) for key in ("h", "m", "s", "ms"))
    return ((hours * 60 + minutes) * 60 + seconds) * 1000 + millis


def human_latency_us(text: str) -> float:
    """'233us' -> 233.0, '7.88ms' -> 7880.0, '1.01s' -> 1010000.0 (3 significant digits)."""
    match = _HUMAN_LATENCY.match(text)
    if not match:
        raise ToolOutputError(f"unexpected latency {text!r}")
    return round(float(match["number"]) * _US_PER_UNIT[match["unit"]], 3)


def _text_latency(value: str):
    match = _LATENCY.search(value)
    return tuple(human_latency_us(match[key]) for key in ("min", "avg", "max")) if match else None


def _text_percentiles(value: str):
    found = {float(m["p"]): float(m["us"]) for m in _PERCENTILE.finditer(value)}
    return found or None  # 'Histogram exceeded'


def _text_histogram(value: str):
    pairs = [(float(m["upper"]), int(m["count"])) for m in _HISTOGRAM_BUCKET.finditer(value)]
    if not pairs:
        return None
    return [upper for upper, _ in pairs], [count for _, count in pairs]


# --- live CSV (--livecsv, --livecsvex) -------------------------------------------------------


@dataclass(frozen=True)
class LiveRow:
    timestamp: str
    label: str | None
    phase: str
    runtime_ms: int
    rank: str  # 'Total', or a worker / service index
    mix_type: str | None  # 'Write' / 'Read' in rwmix phases
    done_bytes: int | None
    mib_per_s: float | None
    iops: float | None
    entries: int | None
    entries_per_s: float | None
    entry_latency_us: float | None
    io_latency_us: float | None
    service: str | None  # host:port of the service (service mode, --livecsvex)


_LIVE_COLUMNS = 17  # plus the empty field after elbencho's trailing comma


def read_live_csv(path: Path) -> list[LiveRow]:
    lines = [line for line in _lines(path) if line.strip()]
    if not lines:
        raise ToolOutputError(f"{path}: file is empty")
    if not lines[0].startswith(LIVE_HEADER_START):
        raise ToolOutputError(f"{path}: not an elbencho live CSV (no '{LIVE_HEADER_START}...')")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        if line.startswith(LIVE_HEADER_START):
            continue
        values = line.split(",")
        if len(values) != _LIVE_COLUMNS + 1 or values[-1] != "":
            raise ToolOutputError(f"{path}:{number}: {len(values)} fields (truncated line?)")
        rows.append(_live_row(values, path, number))
    return rows


def _live_row(values: list[str], path: Path, number: int) -> LiveRow:
    (timestamp, label, phase, runtime, rank, mix, _percent, done_bytes, mib_per_s, iops,
     entries, entries_per_s, entry_lat, io_lat, _active, _cpu, service, _) = values  # fmt: skip
    try:
        return LiveRow(
            timestamp=timestamp,
            label=label or None,
            phase=phase,
            runtime_ms=int(runtime),
            rank=rank,
            mix_type=mix or None,
            done_bytes=_int(done_bytes),
            mib_per_s=_float(mib_per_s),
            iops=_float(iops),
            entries=_int(entries),
            entries_per_s=_float(entries_per_s),
            entry_latency_us=_float(entry_lat),
            io_latency_us=_float(io_lat),
            service=service or None,
        )
    except ValueError as error:
        raise ToolOutputError(f"{path}:{number}: {error}") from None


# --- result rows -----------------------------------------------------------------------------

PHASE_OPS = {  # elbencho phase name (without '+s'/'+r') -> op; other phases carry no I/O
    "MKDIRS": "mkdir",
    "MKBUCKETS": "mkdir",
    "WRITE": "write",
    "READ": "read",
    "STAT": "stat",
    "HEADOBJ": "stat",
    "STATDIRS": "stat",
    "LISTOBJ": "list",
    "LISTOBJ_P": "list",
    "RMFILES": "delete",
    "RMOBJECTS": "delete",
    "MULTIDEL": "delete",
    "RMDIRS": "rmdir",
    "RMBUCKETS": "rmdir",
}
_RWMIX = re.compile(r"^(?P<kind>RWMIX|MIX-T)(?P<number>\d+)$")  # RWMIX<read %>, MIX-T<threads>
DATA_OPS = ("read", "write")
S3_PATH_TYPES = ("bucket", "object")


def phase_ops(name: str) -> list[tuple[str, str]]:
    """(op, 'main' | 'rwmix_read') rows of one phase: rwmix phases give a write and a read."""
    base = name.split("+")[0]  # WRITE+s+r: stat/read inline
    if _RWMIX.match(base):
        return [("write", "main"), ("read", "rwmix_read")]
    op = PHASE_OPS.get(base)
    return [(op, "main")] if op else []


def phase_rows(
    phases: list[Phase], *, host: str, run_id: str, params: dict, base: dict, version=None
) -> list[dict]:
    """One row per (phase, op) of one host (or of 'all' in service mode), LAST DONE values."""
    inherited = {key: value for key, value in base.items() if key in _schema_columns()}
    rows = []
    seen: dict[tuple, int] = {}
    for phase in phases:
        for op, part in phase_ops(phase.name):
            measures = getattr(phase, part)
            if measures.is_empty():
                continue
            job = phase.label or run_id
            seen[(job, op)] = seen.get((job, op), 0) + 1
            if seen[(job, op)] > 1:  # the phase again: elbencho --iterations, or MULTIDEL
                job = f"{job}#{seen[(job, op)]}"
            rows.append(
                {
                    **inherited,
                    **_parameters(phase, op, params),
                    "host": host,
                    "job": job,
                    "op": op,
                    **_metrics(phase, op, measures),
                    **_cpu(phase),
                    "errors": 0,  # elbencho stops at the first error; a recorded phase had none
                    "tool_version": phase.version or version,
                    "command": inherited.get("command") or phase.command,
                    "start_time": inherited.get("start_time") or _utc(phase.start),
                }
            )
    return rows


def _parameters(phase: Phase, op: str, params: dict) -> dict:
    mix = _RWMIX.match(phase.name.split("+")[0])
    object_size = phase.path_type in S3_PATH_TYPES
    return {
        "rw": params.get("rw") or _derived_rw(phase, op),
        "bs": (phase.file_size if object_size else phase.block_size)
        or _param(params, "bs", parse_size),
        "iodepth": phase.io_depth or _param(params, "iodepth", int),
        "numjobs": phase.threads or _param(params, "numjobs", int),
        "rwmixread": int(mix["number"])
        if mix and mix["kind"] == "RWMIX"
        else _param(params, "rwmixread", int),
        "size": phase.file_size or _param(params, "size", parse_size),
        "runtime_s": _param(params, "runtime", parse_duration),
    }


def _param(params: dict, name: str, parse):
    try:
        return parse(params[name]) if name in params else None
    except (ValueError, TypeError):
        return None


def _derived_rw(phase: Phase, op: str):
    if op not in DATA_OPS:
        return None
    prefix = "rand" if phase.random else ""
    if _RWMIX.match(phase.name.split("+")[0]):
        return f"{prefix}rw"
    return f"{prefix}{op}"


def _metrics(phase: Phase, op: str, measures: Measures) -> dict:
    duration = None if measures.elapsed_ms is None else measures.elapsed_ms / 1000
    if op in DATA_OPS:
        counts = {
            "bytes": measures.bytes,
            "ios": _ios(phase, measures.bytes),
            "bw_bytes_s": measures.bytes_per_s,
            "iops": measures.iops,
        }
        latency, histogram, printed = (
            measures.io_latency_us,
            measures.io_histogram_us,
            measures.io_percentiles_us,
        )
    else:  # metadata phases count entries (dirs, files, objects, buckets)
        counts = {
            "bytes": None,
            "ios": measures.entries,
            "bw_bytes_s": None,
            "iops": measures.entries_per_s,
        }
        latency, histogram, printed = (
            measures.entry_latency_us,
            measures.entry_histogram_us,
            measures.entry_percentiles_us,
        )
    return {
        **counts,
        "duration_s": duration,
        **_latency(latency),
        **_percentiles(histogram, printed),
    }


TICK_MS = 10  # /proc/stat counts in USER_HZ ticks (100 per second)


def _cpu(phase: Phase) -> dict:
    """elbencho's 0 of a phase shorter than a tick is no measurement (its CPUUtil returns 0
    when no tick passed), so it stays null; over a tick or more 0 is what it measured."""
    if phase.cpu_pct is None:
        return {}
    elapsed = phase.main.elapsed_ms
    if phase.cpu_pct == 0 and (elapsed is None or elapsed < TICK_MS):
        return {}
    return {"cpu_pct": phase.cpu_pct, "cpu_sys_pct": None, "cpu_basis": CPU_HOST}


def _ios(phase: Phase, done_bytes):
    """elbencho prints no I/O count at the default log level: bytes over the block size."""
    block = phase.block_size
    if phase.file_size and block:
        block = min(block, phase.file_size)
    if done_bytes is None or not block:
        return None
    return -(-done_bytes // block)


def _latency(latency_us) -> dict:
    if latency_us is None:
        return dict.fromkeys(LATENCY_SUMMARY)
    low, mean, high = latency_us
    return {
        "lat_mean_ns": mean * 1000,
        "lat_stdev_ns": None,  # elbencho prints none
        "lat_min_ns": low * 1000,
        "lat_max_ns": high * 1000,
    }


def _percentiles(histogram_us, printed_us) -> dict:
    """From the histogram (--lathisto) if there is one, else as printed (--latpercent)."""
    if histogram_us:
        uppers, counts = histogram_us
        return histogram_percentiles([round(us * 1000) for us in uppers], counts, "lat")
    values = [printed_us.get(p) for p in PERCENTILES] if printed_us else []
    if not any(value is not None for value in values):
        return no_percentiles()
    return {
        **{
            column: None if value is None else value * 1000
            for column, value in zip(PERCENTILE_COLUMNS, values, strict=True)
        },
        "lat_basis": "lat",
        "pct_source": "tool",
        "hist_ns": None,
        "hist_count": None,
    }


# --- one storbench run -----------------------------------------------------------------------


def run_outputs(manifest: Manifest, raw_dir: Path) -> list[tuple[str, Path, str | None]]:
    """(host, result folder, version text) per distinct output of the manifest.

    Standalone runs have one folder per host. In service mode one controller folder covers all
    hosts: it may be named by a 'controller' entry or by every host entry (deduplicated).
    """
    entries = list(manifest.hosts or [])
    if manifest.controller:
        entries.append(manifest.controller)
    outputs, seen = [], set()
    for entry in entries:
        if entry["output"] in seen:
            continue
        seen.add(entry["output"])
        folder = raw_dir / entry["output"]
        if not folder.is_dir():
            raise ToolOutputError(f"{folder}: elbencho result folder is missing")
        outputs.append((entry.get("name") or ALL_HOSTS, folder, entry.get("tool_version")))
    return outputs


def parse_run(manifest: Manifest, raw_dir: Path, base: dict) -> list[dict]:
    """Per-host rows plus 'all' rows.

    Standalone: a result folder per host, the 'all' rows summed by storbench. Service mode:
    elbencho's own totals over every service are the 'all' rows (their latency from
    elbencho's merged histogram); each host's row is its service's own part of the run, as
    the service printed it to its log (throughput, counts and elapsed time, no latency).
    """
    params = manifest.params or {}
    service_mode = manifest.execution == "service"
    host_rows: list[dict] = []
    total_rows: list[dict] = []
    for host, folder, version_text in run_outputs(manifest, raw_dir):
        phases = read_folder(folder)
        distributed = service_mode or any((phase.hosts or 1) > 1 for phase in phases)
        rows = phase_rows(
            phases,
            host=ALL_HOSTS if distributed else host,
            run_id=manifest.run_id,
            params=params,
            base=base,
            version=version_from_text(version_text),
        )
        (total_rows if distributed else host_rows).extend(rows)
    if not service_mode:
        return host_rows + aggregate_hosts(host_rows) + total_rows
    for entry in manifest.hosts or []:
        if entry.get("service_log"):
            host_rows += service_log_rows(
                raw_dir / entry["service_log"], entry, manifest, base, total_rows
            )
    return host_rows + total_rows


def service_log_rows(
    path: Path, entry: dict, manifest: Manifest, base: dict, totals: list[dict]
) -> list[dict]:
    """A host's rows from its service's log part: the run's label, each phase as printed."""
    labelled = [phase for phase in read_text(path) if phase.label == manifest.run_id]
    if not labelled:
        raise ToolOutputError(f"{path}: no result of run {manifest.run_id!r} in the service log")
    settings = {}
    if totals:  # the service prints no settings: the controller's totals have them
        settings = {k: totals[0].get(k) for k in ("bs", "iodepth", "numjobs", "command")}
    rows = phase_rows(
        labelled,
        host=entry["name"],
        run_id=manifest.run_id,
        params=manifest.params or {},
        base=base,
        version=version_from_text(entry.get("tool_version")),
    )
    return [{**row, **{k: v for k, v in settings.items() if row.get(k) is None}} for row in rows]


_VERSION = re.compile(r"Version:\s*(\S+)")


def version_from_text(text):
    """'3.1-10' from `elbencho --version` output (' * Version: 3.1-10 ...')."""
    if not text:
        return None
    match = _VERSION.search(text)
    return match.group(1) if match else text.strip() or None


# --- time series (live.csv) ------------------------------------------------------------------


def parse_run_timeseries(manifest: Manifest, raw_dir: Path, base: dict) -> list[dict]:
    services = _service_names(manifest)
    rows = []
    for host, folder, _ in run_outputs(manifest, raw_dir):
        live = folder / LIVE_FILE
        if live.is_file():
            rows += timeseries_rows(
                read_live_csv(live),
                host=host,
                services=services,
                run_id=manifest.run_id,
                base=base,
                source=str(live),
            )
    return rows


def _service_names(manifest: Manifest) -> dict:
    """'host:port' (as elbencho names a service) -> the host's configured name."""
    names = {}
    for entry in manifest.hosts or []:
        if entry.get("endpoint"):
            names[entry["endpoint"]] = entry["name"]
        names.setdefault(entry["name"], entry["name"])
    return names


def timeseries_rows(
    live_rows: list[LiveRow], *, host: str, services: dict, run_id: str, base: dict, source: str
) -> list[dict]:
    """One row per interval: 'Total' rows (host, or 'all' in service mode) and service rows.

    Per-thread rows of a standalone run (Rank 0, 1 ... without a Service) are not hosts and
    are skipped. Bytes per interval are DoneBytes deltas; 'MiB/s' is elbencho's interval rate.
    """
    inherited = {key: value for key, value in base.items() if key in _timeseries_columns()}
    service_mode = any(row.service for row in live_rows)
    previous: dict[tuple, LiveRow] = {}
    clock = _InvocationClock()
    rows = []
    for live in live_rows:
        t_s = clock.seconds(live)
        if live.rank == "Total":
            row_host = ALL_HOSTS if service_mode else host
        elif live.service:
            service_host = live.service.rsplit(":", 1)[0]
            row_host = services.get(live.service) or services.get(service_host) or live.service
        else:
            continue
        op = _live_op(live)
        if op is None:
            continue
        key = (row_host, live.label, live.phase, live.mix_type)
        before = previous.get(key)
        if before is not None and live.runtime_ms <= before.runtime_ms:
            before = None  # the same phase again (a new invocation or iteration)
        previous[key] = live
        rows.append(
            {
                **inherited,
                "host": row_host,
                "job": live.label or run_id,
                "op": op,
                **_interval(live, before, op),
                "t_s": t_s,
                "timestamp": _utc(live.timestamp),
                "source": source,
            }
        )
    return rows


@dataclass
class _PhaseClock:
    """Where one label's current phase sits on its invocation's time axis."""

    phase: str
    offset_ms: int  # the phase's start, since the invocation's
    last_ms: int  # the phase's latest RuntimeMS
    began: datetime.datetime | None  # the invocation's start, by the rows' ISO Date


class _InvocationClock:
    """Seconds since an elbencho invocation (a label) started, across its phases: each phase's
    RuntimeMS starts again at 0 (mkdirs, write, read ... of one run), so a phase is placed
    at its own start as the rows' ISO Date says (phases too short for a live row included),
    else after the previous phase's last row. The first phase's times are its RuntimeMS."""

    def __init__(self) -> None:
        self._clocks: dict[str | None, _PhaseClock] = {}

    def seconds(self, live: LiveRow) -> float:
        moment = _moment(live.timestamp)
        began = moment - datetime.timedelta(milliseconds=live.runtime_ms) if moment else None
        clock = self._clocks.get(live.label)
        same_phase = clock is not None and clock.phase == live.phase
        if clock is None or (same_phase and live.runtime_ms < clock.last_ms):
            # a new invocation of the label (the same phase's time went back)
            clock = self._clocks[live.label] = _PhaseClock(live.phase, 0, 0, began)
        elif not same_phase:
            after_previous = clock.offset_ms + clock.last_ms
            if began is not None and clock.began is not None:
                since_start = round((began - clock.began).total_seconds() * 1000)
                after_previous = max(after_previous, since_start)
            clock.phase, clock.offset_ms, clock.last_ms = live.phase, after_previous, 0
        clock.last_ms = max(clock.last_ms, live.runtime_ms)
        return (clock.offset_ms + live.runtime_ms) / 1000


def _live_op(live: LiveRow):
    ops = phase_ops(live.phase)
    if not ops:
        return None
    return "read" if live.mix_type == "Read" else ops[0][0]


def _interval(live: LiveRow, before, op: str) -> dict:
    seconds = (live.runtime_ms - (before.runtime_ms if before else 0)) / 1000
    if op in DATA_OPS:
        done = _delta(live.done_bytes, before.done_bytes if before else 0)
        rate = live.mib_per_s * MIB if live.mib_per_s is not None else _rate(done, seconds)
        values = {"bytes": done, "ios": None, "bw_bytes_s": rate, "iops": live.iops}
        latency = live.io_latency_us
    else:
        done = _delta(live.entries, before.entries if before else 0)
        rate = live.entries_per_s if live.entries_per_s is not None else _rate(done, seconds)
        values = {"bytes": None, "ios": done, "bw_bytes_s": None, "iops": rate}
        latency = live.entry_latency_us
    return {
        "t_s": live.runtime_ms / 1000,
        "interval_s": seconds,
        **values,
        "lat_mean_ns": latency * 1000 if latency else None,  # 0: nothing completed
        "errors": None,
    }


def _delta(now, then):
    return None if now is None or then is None else now - then


def _rate(amount, seconds):
    return None if amount is None or seconds <= 0 else amount / seconds


def _utc(timestamp):
    """elbencho's local time with offset ('2026-11-21T06:02:55.889+0000') as ISO 8601 UTC."""
    moment = _moment(timestamp)
    return moment.astimezone(datetime.UTC).isoformat(timespec="milliseconds") if moment else None


def _moment(timestamp) -> datetime.datetime | None:
    for layout in ("%Y-%m-%dT%H:%M:%S.%f%z", "%Y-%m-%dT%H:%M:%S%z"):
        try:
            return datetime.datetime.strptime(timestamp or "", layout)
        except ValueError:
            continue
    return None


# --- import ----------------------------------------------------------------------------------


def import_paths(paths: list[Path], base: dict) -> list[dict]:
    """Rows from result folders or single result files made outside storbench.

    run_id is elbencho's label (--label), else the name of the folder holding the files;
    the host is base['host'] or 'localhost' ('all' only for service-mode totals).
    """
    rows = []
    for path in map(Path, paths):
        if path.is_dir():
            phases, folder = read_folder(path), path
        elif path.is_file():
            phases, folder = read_file(path), path.parent
        else:
            raise ToolOutputError(f"{path}: no such file or folder")
        runs: dict[str, list[Phase]] = {}
        for phase in phases:
            runs.setdefault(phase.label or folder.name, []).append(phase)
        for run_id, run_phases in runs.items():
            rows += _import_rows(run_phases, run_id, {**base, "raw_path": str(path)})
    return rows


def import_series(paths: list[Path], base: dict) -> list[dict]:
    """The live CSV (--livecsv) beside each imported result, one series per label."""
    rows = []
    for path in map(Path, paths):
        folder = path if path.is_dir() else path.parent
        live = folder / LIVE_FILE
        if not live.is_file():
            continue
        by_label: dict[str, list[LiveRow]] = {}
        for live_row in read_live_csv(live):
            by_label.setdefault(live_row.label or folder.name, []).append(live_row)
        for run_id, live_rows in by_label.items():
            rows += timeseries_rows(
                live_rows,
                host=base.get("host") or "localhost",
                services={},
                run_id=run_id,
                base={**base, "run_id": run_id},
                source=str(live),
            )
    return rows


def _import_rows(phases: list[Phase], run_id: str, base: dict) -> list[dict]:
    # console output has no header: it names no host and no host count, so its totals are
    # elbencho's over whatever ran (one host or a service run's many): 'all' rows only
    console = all(phase.command is None and phase.start is None for phase in phases)
    service_mode = console or any((phase.hosts or 1) > 1 for phase in phases)
    host = ALL_HOSTS if service_mode else (base.get("host") or "localhost")
    rows = phase_rows(phases, host=host, run_id=run_id, params={}, base={**base, "run_id": run_id})
    return rows if service_mode else rows + aggregate_hosts(rows)


# --- values ----------------------------------------------------------------------------------


def _int(value):
    return None if value in (None, "") else int(value)


def _float(value):
    return None if value in (None, "") else float(value)


def _bool(value):
    if value in (None, ""):
        return None
    return str(value).lower() in ("1", "true")


def _command(value):
    """elbencho's recorded argv: '"elbencho" "-w" ... ' without the trailing space."""
    return value.strip() if value else None
