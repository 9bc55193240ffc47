"""fio's own check of job options at `storbench check` time: `fio --parse-only`.

A job with ``rw: randred``, ``ioengin:`` or ``io_depth:`` would fail when fio runs, in the
middle of a campaign. With fio installed here, the experiment's options (one section per
swept value) go through ``fio --parse-only``, which names each bad option and the nearest
valid one ("Did you mean ioengine?"); without fio, the option names are compared with the
list of the pinned fio version (data/fio-3.33-options.txt) and only close misspellings are
refused (engine-specific options are not in that list). Host-fact values are checked as 1.

fio's verdict on a job text is kept in the user's cache (``$XDG_CACHE_HOME/storbench``,
else ``~/.cache/storbench``), keyed by the text and the fio binary (its path, size and
modification time): fio takes 0.15 s to parse a job, which every `snakemake` start paid for
each fio experiment of the config, at every dry run and resume.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from storbench.core import hostfacts
from storbench.core.atomic import write_text
from storbench.core.suggest import did_you_mean
from storbench.tools.base import pinned_lines

OPTION_LIST = "fio-3.33-options.txt"  # in tools/data
RW_VALUES = ("read", "write", "trim", "randread", "randwrite", "randtrim", "rw", "readwrite",
             "randrw", "trimwrite", "randtrimwrite")  # fmt: skip
# fio 3.33's ioengine names (its HOWTO); a host may lack some, which preflight finds there
ENGINES = frozenset({
    "sync", "psync", "vsync", "pvsync", "pvsync2", "io_uring", "io_uring_cmd", "libaio",
    "posixaio", "solarisaio", "windowsaio", "mmap", "splice", "sg", "libzbc", "null", "net",
    "netsplice", "cpuio", "rdma", "falloc", "ftruncate", "e4defrag", "rados", "rbd", "http",
    "gfapi", "gfapi_async", "libhdfs", "mtd", "dev-dax", "external", "filecreate", "filestat",
    "filedelete", "libpmem", "ime_psync", "ime_psyncv", "ime_aio", "libiscsi", "nbd",
    "libcufile", "dfs", "nfs", "exec", "xnvme", "libblkio", "pmemblk",
})  # fmt: skip
PARSE_TIMEOUT_S = 20
_BAD_OPTION = re.compile(r"^Bad option <([^=>]+)(?:=[^>]*)?>")
_DID_YOU_MEAN = re.compile(r"^Did you mean (\S+)\?")
_FAILED_PARSING = re.compile(r"^fio: failed parsing ([^=]+)=(.*)$")


MAX_PASSES = 4  # fio stops at the first bad section: check again without what it named


def option_problems(sections: list[dict], skip: frozenset[str]) -> dict[str, str]:
    """{option: why} for the options fio would refuse, over every section's options."""
    fio = shutil.which("fio")
    if fio is None:
        return _by_list(sections, skip) | _engine_problems(sections)
    problems = _engine_problems(sections)
    for _ in range(MAX_PASSES):
        found = _parse_only(fio, sections, skip | frozenset(problems))
        if not found:
            break
        problems.update(found)
    return problems


def _job_text(sections: list[dict], skip: frozenset[str]) -> str:
    lines = []
    for index, options in enumerate(sections):
        lines.append(f"[check{index}]")
        for option, value in options.items():
            if option in skip:
                continue
            text = "1" if hostfacts.has_expression(value) else str(value)
            lines.append(f"{option}={text}")
    return "\n".join(lines) + "\n"


def _parse_only(fio: str, sections: list[dict], skip: frozenset[str]) -> dict[str, str]:
    return dict(_parse_job_text(fio, _job_text(sections, skip)))


CACHE_VERSION = "1"  # a change to how fio's output is read here makes every answer stale


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "storbench" / "fio-parse-only"


def _cache_path(fio: str, text: str) -> Path | None:
    try:
        binary = os.stat(fio)
    except OSError:
        return None
    identity = [CACHE_VERSION, os.path.realpath(fio), binary.st_size, binary.st_mtime_ns, text]
    return cache_dir() / f"{hashlib.sha256(json.dumps(identity).encode()).hexdigest()}.json"


@functools.lru_cache(maxsize=256)  # one lookup per distinct job in a process
def _parse_job_text(fio: str, text: str) -> tuple[tuple[str, str], ...]:
    cached = _cache_path(fio, text)
    kept = _kept_answer(cached) if cached else None
    if kept is not None:
        return kept
    problems = _ask_fio(fio, text)
    if problems is None:
        return ()
    if cached:
        _keep_answer(cached, problems)
    return problems


def _kept_answer(path: Path) -> tuple[tuple[str, str], ...] | None:
    try:
        return tuple((str(option), str(why)) for option, why in json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None  # none kept, or an unreadable one: fio answers


def _keep_answer(path: Path, problems: tuple[tuple[str, str], ...]) -> None:
    with contextlib.suppress(OSError):  # a read-only home: fio is asked again next time
        write_text(path, json.dumps(problems))


def _ask_fio(fio: str, text: str) -> tuple[tuple[str, str], ...] | None:
    """fio --parse-only's problems with the job text; None when fio could not check it."""
    with tempfile.NamedTemporaryFile("w", suffix=".fio", prefix="storbench-check-") as job:
        job.write(text)
        job.flush()
        try:
            done = subprocess.run(
                [fio, "--parse-only", job.name],
                capture_output=True, text=True, timeout=PARSE_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            return None  # fio could not check it here; the run will
    problems: dict[str, str] = {}
    lines = (done.stderr + done.stdout).splitlines()
    for number, line in enumerate(lines):
        if match := _BAD_OPTION.match(line.strip()):
            option = match.group(1)
            hint = ""
            if number + 1 < len(lines) and (near := _DID_YOU_MEAN.match(lines[number + 1].strip())):
                hint = f" (did you mean {near.group(1)!r}?)"
            problems.setdefault(option, f"fio has no option {option!r}{hint}")
        elif match := _FAILED_PARSING.match(line.strip()):
            option, value = match.group(1), match.group(2)
            problems.setdefault(option, _value_problem(option, value))
    return tuple(problems.items())


def _value_problem(option: str, value: str) -> str:
    if option in ("rw", "readwrite"):
        hint = did_you_mean(value.split(":")[0], RW_VALUES)
        return f"fio does not take {option}={value!r}{hint}; valid: {', '.join(RW_VALUES)}"
    return f"fio does not take {option}={value!r} (fio --parse-only)"


def _engine_problems(sections: list[dict]) -> dict[str, str]:
    """A misspelt ioengine (fio --parse-only of a job file does not load it): one close to a
    name of fio's own; another name may be a plugin of the hosts' fio, which preflight asks."""
    for options in sections:
        engine = options.get("ioengine")
        if not isinstance(engine, str) or hostfacts.has_expression(engine):
            continue
        name = engine.split(":")[0].strip()  # external:/path/to/engine.so
        if name in ENGINES:
            continue
        if meant := did_you_mean(name, ENGINES, cutoff=0.8):
            return {"ioengine": f"fio has no ioengine {engine!r}{meant}"}
    return {}


@functools.cache
def known_options() -> frozenset[str]:
    return frozenset(pinned_lines(OPTION_LIST))


def _by_list(sections: list[dict], skip: frozenset[str]) -> dict[str, str]:
    known = known_options()
    problems: dict[str, str] = {}
    for options in sections:
        for option in options:
            if option in skip or option in known:
                continue
            if hint := did_you_mean(option, known, cutoff=0.8):
                problems.setdefault(option, f"fio has no option {option!r}{hint}")
        rw = options.get("rw")
        rw_text = rw if isinstance(rw, str) and not hostfacts.has_expression(rw) else None
        if rw_text is not None and rw_text.split(":")[0] not in RW_VALUES:
            problems.setdefault("rw", _value_problem("rw", rw_text))
    return problems
