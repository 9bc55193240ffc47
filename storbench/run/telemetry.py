"""Host telemetry, captured once per campaign: what each client host is, stored beside the results.

Per host one shell script in one round trip collects the kernel, OS release, CPU, memory,
NICs (sysfs; ethtool only where installed and sysfs has no speed), the mount holding the
target (none for S3, or for a block target that is a device node) and the tools' versions.
Each host's facts go to ``<output_dir>/<host>.json``.

:func:`differences` says where a host differs from the majority of hosts; a fact on which
no value has a strict majority (two hosts that differ, or three-way splits) flags no host,
and :func:`no_majority` lists it instead, with the hosts holding each value, so the report
shows it without guessing which host is the odd one out. Memory is compared as shown
(GiB, one decimal), NICs by the (speed, MTU) of links that are not down, the mount by file
system type and options (NFS ``clientaddr`` is each host's own and left out).

Run path: standard library and storbench.hosts (transport, fan-out), atomic and tools only.
"""

from __future__ import annotations

import collections
import json
import math
import re
import shlex
import subprocess
import time
import uuid
from pathlib import Path

from storbench.core import atomic
from storbench.core.model import Host
from storbench.hosts import services
from storbench.hosts.transport import HostError, open_transport
from storbench.tools import get_tool

COLLECT_TIMEOUT_S = 60.0
PROBE_TIMEOUT_S = 10  # findmnt / ethtool: a hung NFS mount must not eat the whole budget
SPEED_UNKNOWN = (-1, 0xFFFFFFFF)  # sysfs and ethtool spellings of "no link speed"
PER_HOST_MOUNT_OPTIONS = ("clientaddr=",)  # NFS: the client's own address differs by design
LINK_DOWN_STATES = ("down", "lowerlayerdown", "notpresent")
FACT_COLUMNS = ("kernel", "os", "cpu", "sockets", "cores", "memory_gib", "nics", "mount")


class TelemetryError(RuntimeError):
    """Telemetry failed on at least one host; the message lists each failed host and why."""


# -- collecting ---------------------------------------------------------------------------


def collect_host(
    host: dict, *, target: dict | None, tools: list[str], timeout_s: float = COLLECT_TIMEOUT_S
) -> dict:
    """The facts of one configured host (one shell round trip); HostError naming it on failure."""
    spec = Host.from_dict(host)
    adapters = [(name, get_tool(name)) for name in tools]
    target_path = _target_path(target)
    delimiter = f"@@storbench-{uuid.uuid4().hex}@@"
    script = _script(delimiter, target_path, adapters, timeout_s)
    try:
        with open_transport(spec) as transport:
            transport.check()
            rc, out, err = transport.shell(script, timeout_s=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise HostError(spec.name, f"telemetry still running after {timeout_s:g}s") from exc
    except OSError as exc:
        raise HostError(spec.name, f"cannot run the telemetry script: {exc}") from exc
    sections = _sections(out, delimiter)
    if rc != 0 or "end" not in sections:
        detail = (err.strip().splitlines() or ["no error output"])[-1]
        raise HostError(spec.name, f"telemetry script failed (exit {rc}): {detail}")
    facts = _facts(sections, [name for name, _ in adapters])
    return {
        "host": spec.name,
        "group": host.get("group"),
        **facts,
        "target_path": target_path,
        "collected_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def collect(hosts: list[dict], *, target, tools, output_dir) -> dict[str, dict]:
    """Collect every host in parallel; write ``<output_dir>/<host>.json`` for each good host.

    If any host fails, raise TelemetryError listing each failed host and why; the good hosts'
    files are written, a failed host gets none (and loses a stale one from an earlier capture).
    """
    names = [host["name"] for host in hosts]
    for name in names:
        if not isinstance(name, str) or "/" in name or name in ("", ".", ".."):
            raise ValueError(f"host name {name!r} cannot be a file name")
    output_dir = Path(output_dir)
    return collect_each(
        [
            {"host": host, "target": target, "tools": tools, "output": output_dir / f"{name}.json"}
            for host, name in zip(hosts, names, strict=True)
        ]
    )


def collect_each(entries: list[dict]) -> dict[str, dict]:
    """Each entry's host ({host, target, tools, output}) collected in parallel, as many at once
    as the fan-out allows; its facts written to its output. A failed host gets no file (and
    loses a stale one); TelemetryError lists each failed host and why."""
    names = [entry["host"]["name"] for entry in entries]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"hosts listed twice: {', '.join(duplicates)}")
    for name in sorted({tool for entry in entries for tool in entry["tools"]}):
        get_tool(name)  # an unknown tool fails here, before any host is contacted

    of_host = {entry["host"]["name"]: entry for entry in entries}

    def capture(host: dict) -> dict:
        entry = of_host[host["name"]]
        return collect_host(host, target=entry["target"], tools=entry["tools"])

    results, errors = services.each_host([entry["host"] for entry in entries], capture)
    for entry, name in zip(entries, names, strict=True):
        path = Path(entry["output"])
        if name in results:
            atomic.write_json(path, results[name])
        else:
            path.unlink(missing_ok=True)
    if errors:
        lines = [f"telemetry failed on {len(errors)} of {len(entries)} host(s)"]
        lines += [f"  host {name}: {errors[name]}" for name in names if name in errors]
        raise TelemetryError("\n".join(lines))
    return {name: results[name] for name in names}


def facts_target(targets: list[dict]) -> dict | None:
    """The target whose mount a host's facts describe: its first file or block target."""
    return next((t for t in targets if t.get("type") in ("directory", "block")), None)


def load(paths) -> dict[str, dict]:
    """Facts by host from telemetry JSON files (a folder stands for its *.json files)."""
    files: list[Path] = []
    for path in [paths] if isinstance(paths, str | Path) else paths:
        path = Path(path)
        files += sorted(path.glob("*.json")) if path.is_dir() else [path]
    facts_by_host: dict[str, dict] = {}
    for path in files:
        try:
            facts = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise TelemetryError(f"{path}: not a telemetry file: {error}") from error
        if not isinstance(facts, dict) or not isinstance(facts.get("host"), str):
            raise TelemetryError(f"{path}: not a telemetry file: no 'host'")
        if facts["host"] in facts_by_host:
            raise TelemetryError(f"{path}: host {facts['host']} already loaded from another file")
        facts_by_host[facts["host"]] = facts
    return facts_by_host


def _target_path(target: dict | None) -> str | None:
    if not target or target.get("type") == "s3" or not target.get("path"):
        return None
    return str(target["path"])


# -- the remote script --------------------------------------------------------------------


def _script(delimiter: str, target_path: str | None, adapters: list, timeout_s: float) -> str:
    """POSIX sh printing one section per fact; a missing command leaves its section empty."""
    tool_timeout = max(5, math.floor(timeout_s / 2 / max(1, len(adapters))))
    lines = [
        f"d={shlex.quote(delimiter)}",
        'section() { printf \'\\n%s %s\\n\' "$d" "$1"; }',
        'has() { command -v "$1" >/dev/null 2>&1; }',
        "section uname; uname -n; uname -r; uname -m",
        "section os_release",
        "cat /etc/os-release 2>/dev/null || cat /usr/lib/os-release 2>/dev/null",
        "section cpu_online; cat /sys/devices/system/cpu/online 2>/dev/null",
        "section nproc; getconf _NPROCESSORS_ONLN 2>/dev/null || nproc 2>/dev/null",
        "section packages; cat /sys/devices/system/cpu/cpu[0-9]*/topology/physical_package_id"
        " 2>/dev/null | sort -u",
        "section cpu_model; grep -m1 -i '^model name' /proc/cpuinfo 2>/dev/null",
        "section lscpu; has lscpu && LC_ALL=C lscpu 2>/dev/null | grep -E '^(Model name|Socket)'",
        "section meminfo; grep '^MemTotal:' /proc/meminfo 2>/dev/null",
        "section nics",
        "for dev in /sys/class/net/*; do",
        '  [ -e "$dev" ] || continue',
        '  n=${dev##*/}; [ "$n" = lo ] && continue',
        '  speed=$(cat "$dev/speed" 2>/dev/null); mtu=$(cat "$dev/mtu" 2>/dev/null)',
        '  state=$(cat "$dev/operstate" 2>/dev/null)',
        '  driver=$(readlink "$dev/device/driver" 2>/dev/null); driver=${driver##*/}',
        "  es=; ed=",
        "  if has ethtool; then",
        f'    es=$(timeout {PROBE_TIMEOUT_S} ethtool "$n" 2>/dev/null'
        " | sed -n 's/^[[:space:]]*Speed:[[:space:]]*//p')",
        f'    ed=$(timeout {PROBE_TIMEOUT_S} ethtool -i "$n" 2>/dev/null'
        ' | sed -n "s/^driver: //p")',
        "  fi",
        "  printf '%s\\t%s\\t%s\\t%s\\t%s\\t%s\\t%s\\n'"
        ' "$n" "$speed" "$mtu" "$state" "$driver" "$es" "$ed"',
        "done",
    ]
    if target_path is not None:
        lines += [
            # the target folder may not exist yet: its nearest existing parent has the mount
            f"p={shlex.quote(target_path)}",
            'while [ ! -e "$p" ] && [ "$p" != / ] && [ "$p" != . ]; do p=$(dirname -- "$p"); done',
            # a device node is not on a file system worth reporting (it would say devtmpfs)
            'if [ -b "$p" ]; then section block_device; else',
            "fm=",
            f'has findmnt && fm=$(timeout {PROBE_TIMEOUT_S} findmnt -T "$p" -n -r'
            " -o TARGET,SOURCE,FSTYPE,OPTIONS 2>/dev/null)",
            'if [ -n "$fm" ]; then section findmnt; printf "%s\\n" "$fm"',
            'else section realpath; readlink -f -- "$p" 2>/dev/null || printf "%s\\n" "$p"',
            "  section mounts; cat /proc/mounts 2>/dev/null",
            "fi",
            "fi",
        ]
    lines.append("e=$(mktemp 2>/dev/null) || e=/dev/null")
    for index, (_, adapter) in enumerate(adapters):
        command = shlex.join(adapter.version_command())
        lines += [
            f"section tool_out:{index}",
            f'timeout -k 5 {tool_timeout} {command} </dev/null 2>"$e"; rc=$?',
            f'section tool_rc:{index}; echo "$rc"',
            f'section tool_err:{index}; [ "$e" = /dev/null ] || cat "$e"',
        ]
    lines += ['[ "$e" = /dev/null ] || rm -f "$e"', "section end", "exit 0"]
    return "\n".join(lines) + "\n"


def _sections(out: str, delimiter: str) -> dict[str, str]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in out.split("\n"):
        if line.startswith(delimiter + " "):
            current = sections.setdefault(line[len(delimiter) + 1 :], [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(body).strip("\n") for name, body in sections.items()}


# -- parsing the sections -----------------------------------------------------------------


def _facts(sections: dict[str, str], tools: list[str]) -> dict:
    uname = sections.get("uname", "").splitlines() + [""] * 3
    lscpu = _colon_fields(sections.get("lscpu", ""))
    model_line = sections.get("cpu_model", "")
    cpu_model = model_line.partition(":")[2].strip() or lscpu.get("Model name") or None
    return {
        "hostname": uname[0].strip() or None,
        "kernel": uname[1].strip() or None,
        "arch": uname[2].strip() or None,
        "os_release": _pretty_name(sections.get("os_release", "")),
        "cpu_model": cpu_model,
        "cores": _cpu_count(sections.get("cpu_online", ""), sections.get("nproc", "")),
        "sockets": _sockets(sections.get("packages", ""), lscpu.get("Socket(s)")),
        "mem_bytes": _mem_bytes(sections.get("meminfo", "")),
        "nics": _nics(sections.get("nics", "")),
        "target_mount": _target_mount(sections),
        "tool_versions": {tool: _tool_version(sections, index) for index, tool in enumerate(tools)},
    }


def _colon_fields(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        if colon:
            fields.setdefault(key.strip(), value.strip())
    return fields


def _pretty_name(os_release: str) -> str | None:
    for line in os_release.splitlines():
        key, equals, value = line.partition("=")
        if equals and key.strip() == "PRETTY_NAME":
            try:
                words = shlex.split(value)
            except ValueError:
                return value.strip() or None
            return " ".join(words) or None
    return None


def parse_cpu_list(text: str) -> int | None:
    """Number of CPUs in a kernel CPU list such as '0-3,8-11' (sysfs 'online')."""
    count = 0
    for part in text.strip().split(","):
        low, dash, high = part.partition("-")
        if not low.strip().isdigit() or (dash and not high.strip().isdigit()):
            return None
        count += int(high) - int(low) + 1 if dash else 1
    return count


def _cpu_count(online: str, nproc: str) -> int | None:
    if online.strip():
        count = parse_cpu_list(online)
        if count:
            return count
    first = (nproc.split() or [""])[0]
    return int(first) if first.isdigit() else None


def _sockets(packages: str, lscpu_sockets: str | None) -> int | None:
    ids = {line.strip() for line in packages.splitlines() if line.strip().isdigit()}
    if ids:
        return len(ids)
    if lscpu_sockets and lscpu_sockets.isdigit():
        return int(lscpu_sockets)
    return None


def _mem_bytes(meminfo: str) -> int | None:
    match = re.search(r"MemTotal:\s*(\d+)\s*kB", meminfo)
    return int(match.group(1)) * 1024 if match else None


def _nics(text: str) -> list[dict]:
    nics = []
    for line in text.splitlines():
        fields = (line.split("\t") + [""] * 7)[:7]
        name, speed, mtu, state, driver, ethtool_speed, ethtool_driver = fields
        if not name:
            continue
        nics.append({
            "name": name,
            "speed_mbps": _speed(speed) or _speed(ethtool_speed.removesuffix("Mb/s")),
            "mtu": int(mtu) if mtu.strip().isdigit() else None,
            "state": state.strip() or None,
            "driver": driver.strip() or ethtool_driver.strip() or None,
        })  # fmt: skip
    return sorted(nics, key=lambda nic: nic["name"])


def _speed(text: str) -> int | None:
    text = text.strip()
    try:
        speed = int(text)
    except ValueError:
        return None
    return speed if speed > 0 and speed not in SPEED_UNKNOWN else None


def _target_mount(sections: dict[str, str]) -> dict | None:
    if "findmnt" in sections:
        fields = sections["findmnt"].splitlines()[0].split(" ")
        if len(fields) >= 4:
            return _mount(*(unescape_mount_field(field) for field in fields[:4]))
    if "mounts" in sections and sections.get("realpath"):
        return mount_of(sections["realpath"].splitlines()[0], sections["mounts"])
    return None


def mount_of(path: str, proc_mounts: str) -> dict | None:
    """The /proc/mounts entry holding path (longest mount point prefix; the last one wins)."""
    best = None
    for line in proc_mounts.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        source, mount_point, fstype, options = (unescape_mount_field(f) for f in fields[:4])
        inside = mount_point == "/" or path == mount_point or path.startswith(mount_point + "/")
        if inside and (best is None or len(mount_point) >= len(best["path"])):
            best = _mount(mount_point, source, fstype, options)
    return best


def unescape_mount_field(field: str) -> str:
    r"""Undo the escapes of /proc/mounts (\040) and findmnt -r (\x20)."""
    raw = re.sub(
        rb"\\(?:x([0-9a-fA-F]{2})|([0-7]{3}))",
        lambda m: bytes([int(m.group(1), 16) if m.group(1) else int(m.group(2), 8)]),
        field.encode(),
    )
    return raw.decode(errors="replace")


def _mount(path: str, source: str, fstype: str, options: str) -> dict:
    return {"path": path, "source": source, "fstype": fstype, "options": options}


def _tool_version(sections: dict[str, str], index: int) -> str | None:
    if sections.get(f"tool_rc:{index}", "").strip() != "0":
        return None
    text = sections.get(f"tool_out:{index}", "").strip()
    text = text or sections.get(f"tool_err:{index}", "").strip()
    return text.splitlines()[0].strip() if text else None


# -- comparing hosts ----------------------------------------------------------------------


def comparable_facts(facts: dict) -> dict[str, object]:
    """The facts hosts are compared on, by name: kernel ... mount, then tool:<name>."""
    mount = facts.get("target_mount")
    links = sorted(
        (nic.get("speed_mbps") or 0, nic.get("mtu") or 0)
        for nic in facts.get("nics") or []
        if nic.get("state") not in LINK_DOWN_STATES  # a down link carries no benchmark traffic
    )
    values: dict[str, object] = {
        **_system_columns(facts),
        "nics": ", ".join(f"{speed or '?'} Mb/s mtu {mtu or '?'}" for speed, mtu in links),
        "mount": _mount_signature(mount) if mount else None,
    }
    for tool, version in sorted((facts.get("tool_versions") or {}).items()):
        values[f"tool:{tool}"] = version
    return values


def differences(facts_by_host: dict) -> dict[str, list[str]]:
    """Per host, the facts on which it differs from a strict majority of hosts.

    Only hosts with differences appear. A fact with no strict majority value flags nobody
    (see :func:`no_majority`).
    """
    flagged: dict[str, list[str]] = {}
    for fact, by_value in _hosts_by_value(facts_by_host).items():
        majority = _majority(by_value, len(facts_by_host))
        if majority is None:
            continue
        for value, hosts in by_value.items():
            if value != majority:
                for host in hosts:
                    flagged.setdefault(host, []).append(fact)
    return {host: flagged[host] for host in facts_by_host if host in flagged}


def no_majority(facts_by_host: dict) -> dict[str, dict[str, list[str]]]:
    """Facts on which hosts differ but no value has a strict majority: value -> hosts."""
    split = {}
    for fact, by_value in _hosts_by_value(facts_by_host).items():
        if len(by_value) > 1 and _majority(by_value, len(facts_by_host)) is None:
            split[fact] = {_display_value(value): hosts for value, hosts in by_value.items()}
    return split


def _hosts_by_value(facts_by_host: dict) -> dict[str, dict]:
    comparable = {host: comparable_facts(facts) for host, facts in facts_by_host.items()}
    fact_names: dict[str, None] = {}
    for values in comparable.values():
        fact_names.update(dict.fromkeys(values))
    by_fact: dict[str, dict] = {}
    for fact in fact_names:
        by_value: dict = collections.defaultdict(list)
        for host, values in comparable.items():
            by_value[values.get(fact)].append(host)  # a tool a host lacks counts as None
        by_fact[fact] = dict(by_value)
    return by_fact


def _majority(by_value: dict, host_count: int):
    for value, hosts in by_value.items():
        if 2 * len(hosts) > host_count:
            return value
    return None


def _display_value(value) -> str:
    return "unknown" if value is None else str(value)


def _mount_signature(mount: dict) -> str:
    options = [
        option
        for option in (mount.get("options") or "").split(",")
        if not option.startswith(PER_HOST_MOUNT_OPTIONS)
    ]
    return f"{mount.get('fstype')} {','.join(options)}"


def _system_columns(facts: dict) -> dict[str, object]:
    """Kernel, OS, CPU, sockets, cores and memory, as the table shows and hosts compare them."""
    return {
        "kernel": facts.get("kernel"),
        "os": facts.get("os_release"),
        "cpu": facts.get("cpu_model"),
        "sockets": facts.get("sockets"),
        "cores": facts.get("cores"),
        # MemTotal moves by MiBs with kernel reservations: compare what the table shows
        "memory_gib": _gib(facts.get("mem_bytes")),
    }


def _gib(mem_bytes) -> float | None:
    return round(mem_bytes / 2**30, 1) if isinstance(mem_bytes, int) else None


# -- report appendix ----------------------------------------------------------------------


def hosts_table(facts_by_host: dict) -> list[dict]:
    """Rows for the report's hosts appendix; ``differs`` names the columns to highlight."""
    flagged = differences(facts_by_host)
    rows = []
    for host, facts in facts_by_host.items():
        columns = {_column(fact) for fact in flagged.get(host, [])}
        rows.append({
            "host": host,
            "group": facts.get("group"),
            **_system_columns(facts),
            "nics": ", ".join(_nic_text(nic) for nic in facts.get("nics") or []),
            "mount": _mount_text(facts.get("target_mount")),
            "tools": "; ".join(
                f"{tool}: {version or 'missing'}"
                for tool, version in sorted((facts.get("tool_versions") or {}).items())
            ),
            "differs": [c for c in (*FACT_COLUMNS, "tools") if c in columns],
        })  # fmt: skip
    return rows


def _column(fact: str) -> str:
    return "tools" if fact.startswith("tool:") else fact


def _nic_text(nic: dict) -> str:
    speed = f"{nic['speed_mbps']} Mb/s" if nic.get("speed_mbps") else "speed unknown"
    down = f" ({nic['state']})" if nic.get("state") in LINK_DOWN_STATES else ""
    return f"{nic['name']} {speed} mtu {nic.get('mtu')}{down}"


def _mount_text(mount: dict | None) -> str:
    if not mount:
        return ""
    return f"{mount['source']} on {mount['path']} type {mount['fstype']} ({mount['options']})"
