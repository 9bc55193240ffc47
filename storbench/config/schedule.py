"""Schedule files (.sch) of the VAST/Intel scale-test harness as storbench runs.

Format (the guide's sections 4 and 5.4.1): one fio workload per line, fio options written
``--opt=value``; the harness also takes one dash (``-size=30g``, ``-create_only``). A bare
option is a flag with value 1. Blank lines and ``#`` lines are skipped; a word starting
with ``#`` ends the line (a comment). Options keep fio's names, except ``readwrite`` ->
``rw`` and ``blocksize`` -> ``bs`` (storbench's names); whole numbers become ints.

Job names as the guide builds them (5.4.1):
``<op>[_rnd]_qd_<numjobs x iodepth>_<bs>_<numjobs>w``, op ``rd`` (read, randread) or ``wr``
(write, randwrite), ``_rnd`` for random, and ``_<N>tag`` when the line has ``--tag=1``, N
being the workload's number in the file (counting workloads from 1, not lines):
``--rw=randread --numjobs=16 --iodepth=8 --bs=1024k`` -> ``rd_rnd_qd_128_1024k_16w``.
``tag`` is a harness option: it shapes the name and is not passed to fio. rw, bs, numjobs
and iodepth are required (the name is made of them).

Where the guide is silent, storbench decides:
- mixed rw (``rw``, ``readwrite``, ``randrw``): op ``<P>rd``, P the read percentage
  (``rwmixread``, else 100 - ``rwmixwrite``, else fio's default 50), the guide's own
  spelling of a mix (``sweep_iosizes_70rd_random_100g.sch``): ``70rd_rnd_qd_128_4k_16w``;
- ``trim``/``randtrim`` -> ``tr``, ``trimwrite``/``randtrimwrite`` -> ``trwr``; rw's
  ``:<n>`` modifier does not enter the name;
- ``create_only`` (a fio option; the harness's ``-co``) adds ``_co`` before any tag, so a
  pass that only lays out files never takes the measured workload's name;
- bs is written as in the line; characters other than letters, digits, '.' and '-' become
  '-' (``4k,8k`` -> ``4k-8k``);
- a name already taken by an earlier line gets the guide's ``_<N>tag`` suffix (as if the
  line had ``--tag=1``); the first line keeps the plain name;
- ``rwmixreadhost`` (a host-level split) is an experiment setting in storbench, not a line
  option.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from storbench.core import hostfacts, units

REQUIRED = ("rw", "bs", "numjobs", "iodepth")
ALIASES = {"readwrite": "rw", "blocksize": "bs"}
HARNESS_OPTIONS = frozenset({"tag"})  # shape the name, never reach fio
HOST_COUNT = "host"  # the name's count when numjobs or iodepth is a host-fact expression
OPS = {
    "read": "rd",
    "randread": "rd_rnd",
    "write": "wr",
    "randwrite": "wr_rnd",
    "trim": "tr",
    "randtrim": "tr_rnd",
    "trimwrite": "trwr",
    "randtrimwrite": "trwr_rnd",
}
MIXED = {"rw": "", "readwrite": "", "randrw": "_rnd"}
FIO_DEFAULT_RWMIXREAD = 50
_OPTION_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_WHOLE_NUMBER = re.compile(r"^\d+$")
_UNSAFE = re.compile(r"[^A-Za-z0-9.-]")


class ScheduleError(ValueError):
    """A bad schedule line; the message starts with '<source>:<line>: '."""


@dataclass(frozen=True)
class ScheduleEntry:
    name: str  # the guide's job name, unique in the file
    line: int  # 1-based line number in the file
    params: dict  # storbench option names -> values, in the line's order


def parse_schedule(text: str, source: str) -> list[ScheduleEntry]:
    """Every workload of a schedule file, named as the guide names them."""
    entries: list[ScheduleEntry] = []
    taken: set[str] = set()
    for line_number, line in enumerate(text.splitlines(), start=1):
        where = f"{source}:{line_number}"
        tokens = _words(line, where)
        if not tokens:
            continue
        workload = len(entries) + 1
        options = _options(tokens, where)
        name = job_name(options, workload, where)
        if name in taken:
            name = f"{name}_{workload}tag"
        if name in taken:
            raise ScheduleError(f"{where}: job name {name!r} is already taken")
        taken.add(name)
        params = {k: v for k, v in options.items() if k not in HARNESS_OPTIONS}
        entries.append(ScheduleEntry(name=name, line=line_number, params=params))
    return entries


def schedule_runs(path) -> list[tuple[str, dict]]:
    """(run id = the guide's job name, params) for each workload of the file at path."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise ScheduleError(f"{path}: cannot read schedule file: {error}") from error
    entries = parse_schedule(text, str(path))
    if not entries:
        raise ScheduleError(f"{path}: no workloads (every line is blank or a comment)")
    return [(entry.name, entry.params) for entry in entries]


def job_name(options: dict, workload: int, where: str = "schedule") -> str:
    """The guide's name of one workload; workload is its 1-based number in the file."""
    missing = [option for option in REQUIRED if option not in options]
    if missing:
        raise ScheduleError(
            f"{where}: missing {', '.join('--' + m for m in missing)} (the job name needs"
            f" {', '.join(REQUIRED)})"
        )
    if any(hostfacts.has_expression(options[o]) for o in ("numjobs", "iodepth")):
        depth, threads = HOST_COUNT, HOST_COUNT  # one name for every host's own count
    else:
        numjobs = _positive(options, "numjobs", where)
        depth, threads = str(numjobs * _positive(options, "iodepth", where)), str(numjobs)
    parts = [
        _op(options, where),
        "qd",
        depth,
        _UNSAFE.sub("-", str(options["bs"])),
        f"{threads}w",
    ]
    if _flag(options, "create_only", where):
        parts.append("co")
    if _flag(options, "tag", where):
        parts.append(f"{workload}tag")
    return "_".join(parts)


def _words(line: str, where: str) -> list[str]:
    """The line's words as sh splits them, up to a word starting with '#'."""
    if line.lstrip().startswith("#"):
        return []  # a comment line is prose: an apostrophe in it is not a quote
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""  # shlex would also start a comment at '#' inside a word
    try:
        words = list(lexer)
    except ValueError as error:  # unbalanced quotes
        raise ScheduleError(f"{where}: {error}: {line.strip()!r}") from error
    comment = next((i for i, word in enumerate(words) if word.startswith("#")), len(words))
    return words[:comment]


def _options(tokens: list[str], where: str) -> dict:
    options: dict = {}
    for token in tokens:
        name, value = _split_token(token, where)
        name = ALIASES.get(name, name)
        if name in options:
            raise ScheduleError(f"{where}: option {name!r} given twice (at {token!r})")
        if name == "rwmixreadhost":
            raise ScheduleError(
                f"{where}: {token!r}: rwmixreadhost is an experiment setting in storbench"
                " (experiments.<name>.rwmixreadhost), not a schedule line option"
            )
        options[name] = _check_value(name, value, token, where)
    return options


def _split_token(token: str, where: str) -> tuple[str, object]:
    body = token[2:] if token.startswith("--") else token[1:] if token.startswith("-") else None
    name, equals, value = (body or "").partition("=")
    if body is None or not _OPTION_NAME.match(name):
        raise ScheduleError(
            f"{where}: bad token {token!r}: expected --option=value, -option=value or --flag"
        )
    if not equals:
        return name, 1
    if not value:
        raise ScheduleError(f"{where}: bad token {token!r}: empty value")
    return name, int(value) if _WHOLE_NUMBER.match(value) else value


def _check_value(name: str, value, token: str, where: str):
    if hostfacts.has_expression(value):  # computed per host from its facts, as in a job
        for found in hostfacts.check({name: value}, "x"):
            raise ScheduleError(f"{where}: bad token {token!r}: {found.partition(': ')[2]}")
        return value
    problem: str | None = None
    if name in ("numjobs", "iodepth") and not (isinstance(value, int) and value >= 1):
        problem = "expected a whole number >= 1"
    elif name in ("tag", "create_only") and value not in (0, 1):
        problem = f"expected 0 or 1 (or the bare flag -{name})"
    elif name in ("rwmixread", "rwmixwrite") and not (isinstance(value, int) and value <= 100):
        problem = "expected a percentage 0..100"
    elif name == "rw" and str(value).partition(":")[0] not in {*OPS, *MIXED}:
        problem = f"unknown rw (known: {', '.join([*OPS, *MIXED])})"
    try:
        if name in ("bs", "size") and not re.search(r"[-,:%]", str(value)):
            units.parse_size(value)
        elif name in ("runtime", "ramp_time"):
            units.parse_duration(value)
    except units.UnitError as error:
        problem = str(error)
    if problem:
        raise ScheduleError(f"{where}: bad token {token!r}: {problem}")
    return value


def _positive(options: dict, name: str, where: str) -> int:
    value = options[name]
    if not isinstance(value, int) or value < 1:
        raise ScheduleError(f"{where}: {name}={value!r}: expected a whole number >= 1")
    return value


def _flag(options: dict, name: str, where: str) -> bool:
    value = options.get(name, 0)
    if value not in (0, 1):
        raise ScheduleError(f"{where}: {name}={value!r}: expected 0 or 1")
    return value == 1


def _op(options: dict, where: str) -> str:
    pattern = str(options["rw"]).partition(":")[0]
    if pattern in OPS:
        return OPS[pattern]
    if pattern in MIXED:
        return f"{_read_percent(options)}rd{MIXED[pattern]}"
    known = ", ".join([*OPS, *MIXED])
    raise ScheduleError(f"{where}: rw={options['rw']!r}: unknown rw (known: {known})")


def _read_percent(options: dict) -> int:
    if "rwmixread" in options:
        return options["rwmixread"]
    if "rwmixwrite" in options:
        return 100 - options["rwmixwrite"]
    return FIO_DEFAULT_RWMIXREAD
