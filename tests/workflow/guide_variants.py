"""Scaled-down variants of the shipped guide configs, for real runs on the loopback lab.

``scaled_down(example, lab)`` reads a config from config/examples/ and keeps its structure
(experiments, order, waits, set-up steps, datasets, recipes, searches, tables, network
checks) while it:

- maps every host group to lab hosts (a group of several nodes to two, a single node to a
  third) on one sshd port, with the lab's key and known_hosts; data addresses become the
  hosts' own (the tests never leave loopback);
- makes every directory or block target a directory under the test's folder (capacity
  16 MiB) and drops S3 targets and experiments whose tool is not installed here;
- runs 1 s per run, one iteration, at most two values per swept option, sizes of a few MiB
  (host-fact and storage-fact expressions stay: ``mem`` in a size becomes ``mem // 4096``,
  the declared storage is shrunk);
- replaces set-up commands by tmpfs mounts on each host's target directory (per-target
  commands write a file), so `snakemake cleanup` has real mounts to undo.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import yaml

from tests.paths import REPO

EXAMPLES = REPO / "config" / "examples"
GROUP_ADDRESSES = ("127.0.0.6", "127.0.0.7")  # a group of several nodes
SINGLE_ADDRESS = "127.0.0.8"  # a group of one node (an iperf3 server, a coordinator)
LAB_ADDRESSES = (*GROUP_ADDRESSES, SINGLE_ADDRESS)
TOOL_BINARIES = {"elbencho": "elbencho", "warp": "warp", "gosbench": "gosbench-server",
                 "vdbench": "vdbench", "fio": "fio", "iperf3": "iperf3"}  # fmt: skip
CAPACITY = "16MiB"
SMALL_SIZE = "4MiB"


def installed(tool: str) -> bool:
    return shutil.which(TOOL_BINARIES.get(tool, tool)) is not None


def scaled_down(example: str, lab: dict, folder: Path) -> dict:
    """The example's config, scaled down to the lab (see the module docstring)."""
    raw = yaml.safe_load((EXAMPLES / example).read_text())
    raw.pop("campaign")  # each variant has its own folder: results/ and reports/ at its top
    single = {name for name, group in raw["hosts"].items() if _node_count(group) == 1}
    raw["hosts"] = {
        name: _lab_group(group, lab, folder, name in single) for name, group in raw["hosts"].items()
    }
    dropped_targets = set()
    for name, target in list(raw["targets"].items()):
        if target["type"] == "s3":
            dropped_targets.add(name)
            del raw["targets"][name]
        else:
            raw["targets"][name] = {
                "type": "directory",
                "path": str(folder / "targets" / name),
                "capacity": CAPACITY,
            }
    experiments = {}
    for name, spec in raw["experiments"].items():
        targets = [spec["target"]] if isinstance(spec["target"], str) else spec["target"]
        if installed(spec["tool"]) and not dropped_targets & set(targets):
            experiments[name] = _experiment(spec)
    for spec in experiments.values():
        after = [spec["after"]] if isinstance(spec.get("after"), str) else spec.get("after") or []
        kept = [name for name in after if name in experiments]
        spec.pop("after", None)
        if kept:
            spec["after"] = kept
    raw["experiments"] = experiments
    raw.pop("run", None)
    if "storage" in raw and "memory" in raw["storage"]:
        raw["storage"]["memory"] = "4MiB"  # sizes 3 x the storage memory stay small
    for spec in (raw.get("datasets") or {}).values():
        spec["job"] = _sizes(spec["job"])
    for spec in (raw.get("preconditioning") or {}).values():
        _recipe(spec)
    _setup(raw, folder)
    _network(raw)
    report = raw.setdefault("report", {})
    report["pdf"] = False
    if report.get("tables"):
        report["tables"] = {
            name: table
            for name, table in report["tables"].items()
            if set(table.get("experiments") or experiments) <= set(experiments)
        }
    return raw


def _node_count(group: dict) -> int:
    if group.get("transport") == "local":
        return 1
    from ClusterShell.NodeSet import NodeSet

    return len(NodeSet(str(group.get("nodes", ""))))


def _lab_group(group: dict, lab: dict, folder: Path, single: bool) -> dict:
    if group.get("transport") == "local":
        return group
    kept = {k: v for k, v in group.items() if k in ("service_ports",)}
    if "controller_address" in group:
        kept["controller_address"] = "127.0.0.1"
    if "data_address" in group:
        kept["data_address"] = "{name}"
    return {
        **kept,
        "nodes": SINGLE_ADDRESS if single else ",".join(GROUP_ADDRESSES),
        "transport": "ssh",
        "user": "root",
        "port": lab["port"],
        "identity": lab["identity"],
        "known_hosts": lab["known_hosts"],
        "workdir": str(folder / "remote"),
    }


def _experiment(spec: dict) -> dict:
    spec = dict(spec)
    spec["iterations"] = 1
    spec.pop("timeout", None)
    if "wait" in spec:
        spec["wait"] = "1s"
    job = _sizes(dict(spec.get("job") or {}))
    job["runtime"] = "1s"
    job.pop("ramp_time", None)
    if isinstance(job.get("numjobs"), int):
        job["numjobs"] = min(job["numjobs"], 4)
    if spec["tool"] == "fio" and "dataset" not in spec:
        job.setdefault("size", SMALL_SIZE)  # block targets became directories
    spec["job"] = job
    if "sweep" in spec:
        spec["sweep"] = {
            option: (
                {name: listed[:2] for name, listed in values.items()}
                if option == "zip"
                else values[:2]
            )
            for option, values in spec["sweep"].items()
        }
    if "search" in spec:
        spec["search"] = {**spec["search"], "max_iodepth": 4}
    if "steps" in spec:  # a step never larger than the lab's group
        spec["steps"] = {**spec["steps"], "size": min(spec["steps"].get("size", 1), 2)}
    return spec


def _sizes(job: dict) -> dict:
    from storbench.core import hostfacts

    job = dict(job)
    for option, small in (("size", SMALL_SIZE), ("filesize", "1MiB")):
        if option in job and not hostfacts.has_expression(job[option]):
            job[option] = small
        elif option in job:  # still the host's facts, at 1/4096 of its memory
            job[option] = re.sub(r"\bmem\b", "(mem // 4096)", job[option])
    job.pop("direct", None)  # the set-up steps mount tmpfs, which has no O_DIRECT
    return job


def _recipe(spec: dict) -> None:
    spec["capacity"] = CAPACITY
    spec.pop("chunk", None)
    job = dict(spec.get("job") or {})
    job.pop("direct", None)
    spec["job"] = job
    for item in spec.get("passes") or []:
        item["repeat"] = min(item.get("repeat", 1), 2)
    if "flush" in spec:
        spec["flush"] = {"wait": "1s"}
    spec.pop("timeout", None)


def _setup(raw: dict, folder: Path) -> None:
    claimed: set[str] = set()
    for name, step in (raw.get("setup") or {}).items():
        if step.get("once"):
            marker = folder / "once" / name
            step["command"] = f"mkdir -p {marker} && echo done > {marker}/attributes"
            step.pop("check", None)
            step.pop("undo", None)
            continue
        directory = _mounted_target(raw, name, folder)
        if directory in claimed:  # two steps mounting one target: the second mounts beside it
            directory = str(folder / "mnt" / name)
        claimed.add(directory)
        point = f"{directory}/{{host}}"
        step["command"] = f"mkdir -p {point} && mount -t tmpfs -o size=256m storbench-lab {point}"
        step["check"] = f"mountpoint -q {point}"
        step["undo"] = f"umount {point}"


def _mounted_target(raw: dict, step: str, folder: Path) -> str:
    """The directory target of the first experiment that needs the step (its mount)."""
    for spec in raw["experiments"].values():
        steps = [spec["setup"]] if isinstance(spec.get("setup"), str) else spec.get("setup") or []
        target = raw["targets"].get(spec["target"]) if isinstance(spec["target"], str) else None
        if step in steps and target:
            return target["path"]
    return str(folder / "mnt" / step)


def _network(raw: dict) -> None:
    network = raw.get("network")
    if not network:
        return
    network["duration"] = "2s"
    if "server" in network:
        network["server"] = SINGLE_ADDRESS
