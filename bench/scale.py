"""Benchmark: 128 loopback sshd hosts (issue 24); start, a sweep in both modes, controller cost.

Real sshd on 127.0.1.1..127.0.1.N (past 254 hosts on 127.0.2.x and on; clear of services.py,
dispatch.py, ingest.py and the tests, all on 127.0.0.x), started with the tests' SshLab.
Each figure is a ratio against an anchor measured in the same run:

1. Starting fio services on all N hosts (start + ready): storbench.hosts.services vs clush
   (system ssh, fanout N) vs a fabric ThreadingGroup, interleaved, each stopped and checked
   gone between repetitions (bench/services.py's variants).
2. A sweep of short fio runs (ioengine=null, time_based) on all N hosts through a real
   Snakemake campaign (the repo's Snakefile, --cores 2), once with execution: service and
   once standalone (SSH). Anchors: the manifests' own `fio --client=...` commands run back to
   back against services started once (service mode), and per run one system `ssh host fio
   job` per host, all at once (standalone). Per run: wall, start skew across hosts.
3. The controller's cost of each variant: CPU seconds of its process tree (children's
   user + sys) and the peak of the tree's summed RSS (polled from /proc).

Writes bench/out/scale.json ("quick": true with --quick). Never leaves an sshd or fio
behind, also on Ctrl-C or an error.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO), str(HERE)]

import services as lab_bench  # noqa: E402
from dispatch import controller_output, host_runtimes_ms, when  # noqa: E402

from storbench.core.atomic import write_json  # noqa: E402
from storbench.core.specs import start_skew_s  # noqa: E402
from storbench.hosts import services as storbench_services  # noqa: E402
from storbench.run.start import stamps_in  # noqa: E402

OUT = REPO / "bench" / "out"
WORK = OUT / "scale-work"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
PORT = 8765  # fio's service port (storbench.tools.fio default_port)
TOOL = "fio"
EXPERIMENT = "scale"
RUNTIME_S = 2
LEARNED_FROM = 2  # cycles from the third run on: run/start_margin learned their release
BLOCK_SIZES = ["4k", "8k", "16k", "32k", "64k", "128k", "256k", "512k", "1m", "2m"]
JOB = {
    "rw": "read", "ioengine": "null", "size": "1MiB", "numjobs": 1,
    "runtime": f"{RUNTIME_S}s", "time_based": 1,
}  # fmt: skip
FULL = {"hosts": 128, "start_repetitions": 3, "runs": 5}  # about 20 min; see NOTES
QUICK = {"hosts": 16, "start_repetitions": 2, "runs": 5}
CAMPAIGN_TIMEOUT_S = 1200
ANCHOR_RUN_TIMEOUT_S = 120
FILES_PER_HOST = 16  # sshd, its session, ssh client, sockets: a generous guess
SAMPLE_EVERY_S = 0.25
PSS_EVERY_SAMPLES = 4  # smaps_rollup walks each process's page tables: once a second
STAMP_PREFIX = "anchor-start "
MAX_HOSTS = 4 * 254
TREE_SSH_PORT = 2222  # connection tree: a gateway reaches its hosts on its own SSH port


def addresses_for(hosts: int) -> list[str]:
    """127.0.1.1..127.0.1.254, then 127.0.2.1 and on: past 254 hosts a subnet each 254."""
    if not 1 <= hosts <= MAX_HOSTS:
        raise SystemExit(f"--hosts: 1..{MAX_HOSTS} (127.0.1.1..127.0.4.254), not {hosts}")
    return [f"127.0.{1 + index // 254}.{1 + index % 254}" for index in range(hosts)]


# -- limits ---------------------------------------------------------------------------------


def raise_file_limit(hosts: int) -> dict:
    """Raise the soft open-files limit towards the hard one if N hosts may need more."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 1024 + FILES_PER_HOST * hosts
    raised = soft
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
    processes = resource.getrlimit(resource.RLIMIT_NPROC)
    return {
        "nofile_soft_before": soft,
        "nofile_soft": raised,
        "nofile_hard": hard,
        "nofile_wanted": wanted,
        "nproc_soft": processes[0],
    }


def parallel_settings() -> dict:
    """storbench's host fan-out as it is in this checkout."""
    return {"fanout": storbench_services.fanout()}


# -- the controller's process tree: CPU and peak RSS ----------------------------------------


def child_pids(pid: int) -> list[int]:
    found = []
    with contextlib.suppress(OSError):  # the process or a task may just have exited
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                children = Path(f"/proc/{pid}/task/{task}/children").read_text()
                found += [int(child) for child in children.split()]
    return found


def resident_bytes(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGESIZE")
    except (OSError, IndexError, ValueError):
        return 0


def proportional_bytes(pid: int) -> int:
    """The process's proportional set size (PSS): a page shared by n processes counts 1/n in
    each, where summed RSS counts the shared libraries of 128 ssh masters 128 times."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


class ControllerCost:
    """CPU seconds (children's user + sys, once reaped) and the peak summed RSS and PSS of
    every process this script starts meanwhile, without the sshd servers (the hosts' side)."""

    def __init__(self, excluded: set[int]):
        self.excluded = excluded
        self.peak_rss = 0
        self.peak_pss = 0
        self.peak_processes = 0
        # (epoch seconds, summed RSS bytes, summed PSS bytes or None when not sampled)
        self.samples: list[tuple[float, int, int | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="rss-poll", daemon=True)

    def __enter__(self):
        self._usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        self._thread.join()
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.user_s = usage.ru_utime - self._usage.ru_utime
        self.sys_s = usage.ru_stime - self._usage.ru_stime

    def _poll(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            pids = self._tree(os.getpid())
            self.peak_processes = max(self.peak_processes, len(pids))
            rss = sum(resident_bytes(pid) for pid in pids)
            self.peak_rss = max(self.peak_rss, rss)
            pss = None
            if len(self.samples) % PSS_EVERY_SAMPLES == 0:
                pss = sum(proportional_bytes(pid) for pid in pids)
                self.peak_pss = max(self.peak_pss, pss)
            self.samples.append((time.time(), rss, pss))

    def _tree(self, root: int) -> list[int]:
        pids, todo = [], [pid for pid in child_pids(root) if pid not in self.excluded]
        while todo:
            pid = todo.pop()
            pids.append(pid)
            todo += child_pids(pid)
        return pids

    def record(self) -> dict:
        return {
            "cpu_user_s": round(self.user_s, 2),
            "cpu_sys_s": round(self.sys_s, 2),
            "cpu_s": round(self.user_s + self.sys_s, 2),
            "peak_rss_mib": round(self.peak_rss / 2**20, 1),
            "peak_pss_mib": round(self.peak_pss / 2**20, 1),
            "peak_processes": self.peak_processes,
        }

    def peaks_between(self, begin: datetime.datetime, end: datetime.datetime) -> dict:
        """The peak summed RSS and PSS (MiB) sampled from begin to end."""
        window = (begin.timestamp(), end.timestamp())
        inside = [(rss, pss) for at, rss, pss in self.samples if window[0] <= at <= window[1]]
        rss = max((rss for rss, _ in inside), default=0)
        pss = max((pss for _, pss in inside if pss is not None), default=0)
        return {
            "peak_rss_during_runs_mib": round(rss / 2**20, 1),
            "peak_pss_during_runs_mib": round(pss / 2**20, 1),
        }


# -- 1. service start -----------------------------------------------------------------------


def measure_start(
    lab, hosts: list[dict], work: Path, repetitions: int, gateways: list[str]
) -> dict:
    addresses = [host["name"] for host in hosts]
    config = lab_bench.ssh_config(lab, work / "ssh_config")
    persistent = [{**host, "connection": "persistent"} for host in hosts]
    tree = [
        {**host, "connection": "tree", **through_gateway(gateways, index)}
        for index, host in enumerate(hosts)
    ]
    variants = {
        "storbench": lambda: lab_bench.start_storbench(hosts, PORT),
        # the masters are up by then in a campaign: preflight and telemetry opened them
        "storbench_persistent": lambda: lab_bench.start_storbench(persistent, PORT),
        **({"storbench_tree": lambda: lab_bench.start_storbench(tree, PORT)} if gateways else {}),
        "clush": lambda: lab_bench.start_clush(lab, work, PORT, config),
        "fabric_threadinggroup": lambda: lab_bench.start_fabric(
            hosts, [lab_bench.remote_start_script(work, PORT)], PORT
        ),
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    lab_bench.stop_all_services(hosts, PORT)
    failures: dict[str, list[str]] = {name: [] for name in variants}
    for repetition in range(repetitions):
        for name, start in variants.items():
            try:
                _, ready = start()
            except Exception as error:  # recorded: a variant that fails at this scale is a result
                failures[name].append(" | ".join(str(error).splitlines()[:4])[:600])
                print(f"  start rep {repetition + 1} {name:24s} FAILED: {failures[name][-1]}")
                lab_bench.stop_locally(addresses, PORT)
                continue
            count = len(set(lab_bench.running_services(addresses, PORT).values()))
            up = len(lab_bench.answering(addresses, PORT))
            if count != len(addresses) or up != len(addresses):
                raise RuntimeError(f"{name}: fio servers on {count} hosts, {up} answering")
            samples[name].append(round(ready, 3))
            print(f"  start rep {repetition + 1} {name:24s} start + ready {ready:6.2f} s")
            lab_bench.stop_locally(addresses, PORT)
    lab_bench.stop_all_services(hosts, PORT)
    medians = {
        name: round(statistics.median(values), 3) if values else float("nan")
        for name, values in samples.items()
    }
    return {
        "repetitions": repetitions,
        "start_ready_s": samples,
        "start_ready_median_s": medians,
        "failures": {name: errors for name, errors in failures.items() if errors},
        "ratios": {
            "storbench_to_clush": round(medians["storbench"] / medians["clush"], 3),
            "storbench_persistent_to_clush": round(
                medians["storbench_persistent"] / medians["clush"], 3
            ),
            **(
                {"storbench_tree_to_clush": round(medians["storbench_tree"] / medians["clush"], 3)}
                if gateways
                else {}
            ),
            "storbench_to_fabric": round(
                medians["storbench"] / medians["fabric_threadinggroup"], 3
            ),
        },
    }


# -- 2. the sweep through Snakemake ---------------------------------------------------------


def campaign_config(
    lab, work: Path, execution: str, runs: int, connection: str, gateways: list[str], job: dict
) -> dict:
    hosts = {
        f"client{index}": {
            "transport": "ssh",
            "nodes": server.address,
            "user": "root",
            "port": server.port,
            "identity": str(lab.client_key),
            "known_hosts": str(lab.known_hosts),
            "workdir": str(work / "remote" / server.address),
            "connection": connection,
            **through_gateway(gateways, index - 1),
        }
        for index, server in enumerate(lab.servers, start=1)
    }
    return {
        "hosts": hosts,
        # `scratch`: the workflow caps its lock at 1, so the runs go one after another
        "targets": {"scratch": {"type": "directory", "path": str(work / "target")}},
        "experiments": {
            EXPERIMENT: {
                "tool": TOOL,
                "hosts": list(hosts),
                "target": "scratch",
                "execution": execution,
                "iterations": 1,
                "job": job,
                "sweep": {"bs": BLOCK_SIZES[:runs]},
            }
        },
    }


def through_gateway(gateways: list[str], index: int) -> dict:
    """connection: tree settings of host number index: the gateways take turns."""
    if not gateways:
        return {}
    return {"gateway": gateways[index % len(gateways)], "gateway_python": sys.executable}


def run_campaign(campaign: Path, config: dict, excluded: set[int]) -> dict:
    """Run the whole workflow once: launch time, wall seconds and the controller's cost."""
    campaign.mkdir(parents=True)
    (campaign / "campaign.yaml").write_text(yaml.safe_dump(config))
    command = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--configfile", "campaign.yaml"]
    command += ["--cores", "2"]
    log = campaign / "snakemake.log"
    launched = datetime.datetime.now(datetime.UTC)
    with ControllerCost(excluded) as cost, open(log, "w") as output:
        begin = time.monotonic()
        process = subprocess.Popen(command, cwd=campaign, stdout=output, stderr=subprocess.STDOUT)
        try:
            code = process.wait(timeout=CAMPAIGN_TIMEOUT_S)
        except BaseException:
            # Snakemake's own Ctrl-C path stops its jobs and the campaign's services
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            raise
        wall = time.monotonic() - begin
    if code != 0:
        raise RuntimeError(f"snakemake failed:\n{log.read_text()[-3000:]}")
    return {
        "launched": launched,
        "wall_s": wall,
        "cost": cost,
        "rules": rule_timeline(log.read_text()),
    }


def rule_timeline(log: str) -> dict:
    """Per rule of Snakemake's log: its jobs and when the first and last started (seconds
    after the first job; the log stamps whole seconds)."""
    starts: dict[str, list[datetime.datetime]] = {}
    stamp = None
    for line in log.splitlines():
        if line.startswith("[") and line.endswith("]"):
            with contextlib.suppress(ValueError):
                stamp = datetime.datetime.strptime(line[1:-1], "%a %b %d %H:%M:%S %Y")
        elif stamp and line.rstrip(":").split(" ")[0] in ("rule", "localrule"):
            starts.setdefault(line.split(" ", 1)[1].rstrip(":"), []).append(stamp)
    if not starts:
        return {}
    first = min(min(moments) for moments in starts.values())
    return {
        rule: {
            "jobs": len(moments),
            "first_start_s": (min(moments) - first).total_seconds(),
            "last_start_s": (max(moments) - first).total_seconds(),
        }
        for rule, moments in sorted(starts.items(), key=lambda item: min(item[1]))
    }


def run_record(iteration_dir: Path) -> dict:
    """One run of the campaign: its span, fio's own runtime and the start skew across hosts."""
    manifest = json.loads((iteration_dir / "run.json").read_text())
    raw = iteration_dir / manifest["raw_dir"]
    controller = manifest.get("controller")
    if controller:  # service mode: one client for every host
        runtimes_ms = host_runtimes_ms(controller_output(raw / controller["output"]))
        moments = [controller["start_time"], controller["end_time"]]
    else:
        runtimes_ms = {
            host["name"]: max(job["job_runtime"] for job in fio_output(raw / host["output"]))
            for host in manifest["hosts"]
        }
        moments = []
    for host in manifest["hosts"]:
        moments += [host[key] for key in ("launch_time", "start_time", "end_time") if host.get(key)]
    sources = {host["start_time_source"] for host in manifest["hosts"]}
    skew = manifest.get("start_skew_s")
    if skew is None:
        skew = start_skew_s(manifest["hosts"])
    begin, end = min(map(when, moments)), max(map(when, moments))
    return {
        "run_id": manifest["run_id"],
        "begin": begin.isoformat(),
        "span_s": round((end - begin).total_seconds(), 3),
        "fio_runtime_s": round(max(runtimes_ms.values()) / 1000, 3),
        "start_skew_s": None if skew is None else round(skew, 4),
        "start_time_sources": sorted(sources),
        "release_time": manifest.get("release_time"),
        "command": controller["command"] if controller else None,
        "job_file": str((iteration_dir / manifest["job_file"]).resolve()),
    }


def fio_output(path: Path) -> list[dict]:
    text = path.read_text()
    return json.loads(text[text.index("{") :])["jobs"]


def analyse(campaign: Path, runs: int, wall: float) -> dict:
    records = sorted(
        (
            run_record(path.parent)
            for path in campaign.glob(f"results/{EXPERIMENT}/raw/*/it1/run.json")
        ),
        key=lambda record: record["begin"],
    )
    if len(records) != runs:
        raise RuntimeError(f"{campaign}: expected {runs} runs, found {len(records)}")
    begins = [when(record["begin"]) for record in records]
    cycles = [(b - a).total_seconds() for a, b in zip(begins, begins[1:], strict=False)]
    skews = [record["start_skew_s"] for record in records if record["start_skew_s"] is not None]
    return {
        "wall_s": round(wall, 2),
        "runs": len(records),
        "wall_per_run_s": round(wall / len(records), 3),
        "run_cycle_median_s": round(statistics.median(cycles), 3) if cycles else None,
        # from the third run on, each released at the set-up learned from the runs before it
        "run_cycle_learned_median_s": (
            round(statistics.median(cycles[LEARNED_FROM:]), 3) if cycles[LEARNED_FROM:] else None
        ),
        "run_span_median_s": round(statistics.median(r["span_s"] for r in records), 3),
        "fio_runtime_sum_s": round(sum(r["fio_runtime_s"] for r in records), 3),
        "start_skew_s": skew_summary(skews),
        "per_run": records,
    }


def skew_summary(skews: list[float]) -> dict:
    if not skews:
        return {"median": None, "max": None, "runs": 0}
    return {
        "median": round(statistics.median(skews), 4),
        "max": round(max(skews), 4),
        "runs": len(skews),
    }


# -- 2. the anchors -------------------------------------------------------------------------


def client_loop(
    hosts: list[dict], campaign: Path, records: list[dict], work: Path, excluded: set[int]
) -> dict:
    """Service mode's anchor: the manifests' own fio client commands, back to back, against
    services started once; each host's start from the stamp its job's exec_prerun leaves."""
    outputs = work / "anchor-service"
    outputs.mkdir()
    storbench_services.start_services(hosts, TOOL, PORT)
    try:
        walls, runtimes, skews = [], [], []
        with ControllerCost(excluded) as cost:
            for record in records:
                stamps = prerun_stamp_paths(hosts, record["run_id"])
                for path in stamps:
                    path.unlink(missing_ok=True)
                output = outputs / f"{record['run_id']}.json"
                argv = [
                    f"--output={output}" if arg.startswith("--output=") else arg
                    for arg in record["command"]
                ]
                began = time.monotonic()
                subprocess.run(
                    argv, cwd=campaign, check=True, capture_output=True,
                    timeout=ANCHOR_RUN_TIMEOUT_S,
                )  # fmt: skip
                walls.append(time.monotonic() - began)
                runtimes.append(max(host_runtimes_ms(controller_output(output)).values()) / 1000)
                skews.append(spread([earliest_stamp(path) for path in stamps]))
    finally:
        storbench_services.stop_services(hosts, TOOL, PORT)
    return anchor_summary(walls, runtimes, skews, cost)


def prerun_stamp_paths(hosts: list[dict], run_id: str) -> list[Path]:
    """Where fio's exec_prerun writes each host's start (the service's folder; hosts are local)."""
    return [
        Path(storbench_services.service_dir(storbench_services.host_spec(host), TOOL, PORT))
        / f"{run_id}.prerun.txt"
        for host in hosts
    ]


def earliest_stamp(path: Path) -> float | None:
    """The start stamp fio's exec_prerun left: the start hook's (its release long past when
    the anchor runs a manifest's job again), or a bare `date +%s.%N`."""
    with contextlib.suppress(OSError, ValueError):
        text = path.read_text()
        started, _ = stamps_in(text)
        return started if started is not None else min(float(line) for line in text.split())
    return None


def spread(stamps: list[float | None]) -> float | None:
    known = [stamp for stamp in stamps if stamp is not None]
    return max(known) - min(known) if len(known) == len(stamps) and len(known) > 1 else None


def ssh_loop(lab, records: list[dict], work: Path, excluded: set[int]) -> dict:
    """Standalone's anchor: per run, `ssh host fio <its job file>` to every host at once (one
    system ssh process each), wait for all; each host stamps its start just before fio."""
    config = lab_bench.ssh_config(lab, work / "ssh_config")
    outputs = work / "anchor-standalone"
    outputs.mkdir()
    # a folder per host for fio: the job's exec_prerun leaves its output there, not in the home
    for server in lab.servers:
        (outputs / server.address).mkdir()
    walls, runtimes, skews = [], [], []
    with ControllerCost(excluded) as cost:
        for record in records:
            began = time.monotonic()
            processes = []
            try:
                for server in lab.servers:
                    remote = (
                        f"cd {shlex.quote(str(outputs / server.address))} && "
                        f'echo "{STAMP_PREFIX}$(date +%s.%N)" >&2; '
                        f"exec env STORBENCH_HOST={server.address} fio --output-format=json+ "
                        f"{shlex.quote(record['job_file'])}"
                    )
                    base = outputs / f"{record['run_id']}-{server.address}"
                    with open(f"{base}.json", "wb") as out, open(f"{base}.err", "wb") as err:
                        processes.append(
                            subprocess.Popen(
                                ["ssh", "-F", str(config), server.address, remote],
                                stdin=subprocess.DEVNULL,
                                stdout=out,
                                stderr=err,
                            )  # fmt: skip
                        )
                codes = [process.wait(timeout=ANCHOR_RUN_TIMEOUT_S) for process in processes]
            finally:
                for process in processes:
                    if process.poll() is None:
                        process.kill()
                        process.wait()
            walls.append(time.monotonic() - began)
            if any(codes):
                raise RuntimeError(f"ssh loop {record['run_id']}: exit codes {set(codes)}")
            bases = [outputs / f"{record['run_id']}-{server.address}" for server in lab.servers]
            runtimes.append(
                max(
                    job["job_runtime"] for base in bases for job in fio_output(Path(f"{base}.json"))
                )
                / 1000
            )
            skews.append(spread([stderr_stamp(Path(f"{base}.err")) for base in bases]))
    return anchor_summary(walls, runtimes, skews, cost)


def stderr_stamp(path: Path) -> float | None:
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(STAMP_PREFIX):
            return float(line.removeprefix(STAMP_PREFIX))
    return None


def anchor_summary(walls, runtimes, skews, cost: ControllerCost) -> dict:
    return {
        "wall_s": round(sum(walls), 2),
        "per_run_wall_median_s": round(statistics.median(walls), 3),
        "per_run_wall_s": [round(wall, 3) for wall in walls],
        "fio_runtime_sum_s": round(sum(runtimes), 3),
        "start_skew_s": skew_summary([skew for skew in skews if skew is not None]),
        "controller": cost.record(),
    }


def measure_mode(
    lab, hosts, work: Path, execution: str, settings: dict, excluded: set[int]
) -> dict:
    runs = settings["runs"]
    campaign = work / f"campaign-{execution}"
    config = campaign_config(
        lab,
        work,
        execution,
        runs,
        settings["connection"],
        settings["gateway_addresses"],
        settings["job"],
    )
    print(f"  {execution}: Snakemake campaign of {runs} runs on {len(hosts)} hosts")
    done = run_campaign(campaign, config, excluded)
    left = lab_bench.running_services([host["name"] for host in hosts], PORT)
    result = analyse(campaign, runs, done["wall_s"])
    first, last = result["per_run"][0], result["per_run"][-1]
    runs_end = when(last["begin"]) + datetime.timedelta(seconds=last["span_s"])
    result["controller"] = done["cost"].record() | done["cost"].peaks_between(
        when(first["begin"]), runs_end
    )
    result["rules"] = done["rules"]
    result["services_left_after_workflow"] = len(left)
    print(f"  {execution}: anchor")
    if execution == "service":
        anchor = client_loop(hosts, campaign, result["per_run"], work, excluded)
    else:
        anchor = ssh_loop(lab, result["per_run"], work, excluded)
    for record in result["per_run"]:
        del record["command"], record["job_file"]  # kept in each run's manifest
    steady = result["run_cycle_median_s"] or result["wall_per_run_s"]
    learned = result["run_cycle_learned_median_s"]
    return {
        "storbench": result,
        "anchor": anchor,
        "ratios": {
            "run_cycle_to_anchor_run": round(steady / anchor["per_run_wall_median_s"], 3),
            "learned_run_cycle_to_anchor_run": (
                ratio(learned, anchor["per_run_wall_median_s"]) if learned else None
            ),
            "wall_per_run_to_anchor_run": round(
                result["wall_per_run_s"] / anchor["per_run_wall_median_s"], 3
            ),
            "cpu_s_to_anchor": ratio(result["controller"]["cpu_s"], anchor["controller"]["cpu_s"]),
            "peak_rss_to_anchor": ratio(
                result["controller"]["peak_rss_mib"], anchor["controller"]["peak_rss_mib"]
            ),
        },
    }


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


# -- the lab, cleanup, the whole measurement ------------------------------------------------


def work_pattern(work: Path) -> str:
    """ERE for any process whose command line names the work folder (pgrep -f)."""
    return "".join(f"\\{char}" if char in "\\.[]()*+?{}|^$" else char for char in str(work))


def kill_work_processes(work: Path) -> list[str]:
    """Last resort: SIGKILL by pid whatever still runs from the work folder; what it found."""
    done = subprocess.run(
        ["pgrep", "-af", "--", work_pattern(work)], capture_output=True, text=True
    )
    found = []
    for line in done.stdout.splitlines():
        pid = int(line.split(" ", 1)[0])
        if pid != os.getpid():
            found.append(line)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return found


def measure(settings: dict) -> dict:
    every_address = addresses_for(settings["hosts"] + settings["gateways"])
    addresses = every_address[: settings["hosts"]]
    settings["gateway_addresses"] = every_address[settings["hosts"] :]
    limits = raise_file_limit(len(addresses))
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    load_before = os.getloadavg()
    home = os.getcwd()
    os.chdir(WORK)  # storbench's in-process service calls keep their flag file under results/
    began = time.monotonic()
    try:
        ssh_port = TREE_SSH_PORT if settings["gateways"] else None  # a gateway's, its hosts'
        with lab_bench.sshd_lab(WORK / "lab", every_address, PORT, ssh_port) as (lab, _):
            gateway_servers = lab.servers[len(addresses) :]
            lab.servers[len(addresses) :] = []  # the benchmark's hosts; the lab stops all
            try:
                hosts = lab_bench.lab_hosts(lab, WORK)
                excluded = {server.process.pid for server in lab.servers + gateway_servers}
                lab_up_s = time.monotonic() - began
                print(f"{len(every_address)} sshd up in {lab_up_s:.1f} s")
                start = measure_start(
                    lab, hosts, WORK, settings["start_repetitions"], settings["gateway_addresses"]
                )
                modes = {
                    execution: measure_mode(lab, hosts, WORK, execution, settings, excluded)
                    for execution in settings["modes"]
                    if not settings["start_only"]
                }
                left = lab_bench.running_services(addresses, PORT)
            finally:
                lab.servers += gateway_servers
    finally:
        os.chdir(home)
        leftovers = kill_work_processes(WORK)
    if leftovers:
        raise RuntimeError(f"processes left after the lab stopped: {leftovers}")
    return {
        "hosts": len(addresses),
        "addresses": f"{addresses[0]}..{addresses[-1]}",
        "quick": settings["quick"],
        "settings": settings,
        "job": settings["job"],
        "sweep_bs": BLOCK_SIZES[: settings["runs"]],
        "storbench_parallel_settings": parallel_settings(),
        "limits": limits,
        "session_home": str(lab_bench.session_home(WORK / "lab") or "the account's"),
        "cores": os.cpu_count(),
        "loadavg_1_5_15": {"before": load_before, "after": os.getloadavg()},
        "lab_start_s": round(lab_up_s, 1),
        "total_s": round(time.monotonic() - began, 1),
        "versions": lab_bench.versions(),
        "service_start": start,
        "sweep": modes,
        "services_left_at_end": len(left),
        "notes": NOTES,
    }


NOTES = [
    "service_start: wall time until every host's port accepts TCP; storbench's "
    "start_services waits itself, clush and fabric are followed by the same parallel poll "
    "(bench/services.py); stopped by pid and checked gone between repetitions",
    "sweep: one Snakemake campaign per execution mode (the repo's Snakefile, --cores 2, one "
    "host group per host, one directory target, so the runs go one after another); "
    "run_cycle_median_s: median from one run's start to the next's (steady state); "
    "run_cycle_learned_median_s: the same from the third run on (its hosts' release at the "
    "set-up learned from the runs before it, not the first run's listening start nor the "
    "second's release at the first's set-up); "
    "wall_per_run_s: the campaign's wall time (Snakemake start-up, preflight, services, "
    "parse, report) over its runs; run_span_s: a manifest's earliest to latest time stamp",
    "anchors: service mode, the manifests' own fio --client commands back to back against "
    "services started once; standalone, per run one system ssh process per host, all at "
    "once, running fio on the same rendered job file; per_run_wall_median_s",
    "start_skew_s: latest minus earliest host start per run: storbench's manifests "
    "(start_skew_s, hosts' start_time: fio's exec_prerun in both modes, standalone the held "
    "start's hook, right before the I/O); anchors: the same exec_prerun stamp (service), a "
    "`date` just before `exec fio` on each host (ssh loop: before fio's own set-up)",
    "controller: user + sys CPU of every process this script started meanwhile once reaped "
    "(RUSAGE_CHILDREN deltas: Snakemake and its jobs, fio clients, ssh clients) and the peak "
    "of their summed RSS polled from /proc every 0.25 s, and of their summed PSS "
    "(smaps_rollup, every second: shared pages divided among the processes sharing them, "
    "what the tree takes from the machine's memory); the sshd servers and what they run "
    "(the hosts' side: fio, services) are not counted, though they share the 2 cores; "
    "peak_rss_during_runs_mib, peak_pss_during_runs_mib: the peaks from the first run's "
    "start to the last run's end (without render, telemetry before and the reports after)",
    "runs per mode: 5 by default (not 10), also at 128 hosts: at 16 hosts on the shared "
    "2-core machine one service campaign of 5 runs took about 3 min (80 render_host_job jobs, "
    "one per run and host, before they became one per run; 16 telemetry jobs); 10 runs "
    "at 128 hosts would not fit 20 minutes; --runs 10 runs the full sweep; 3 start "
    "repetitions; --quick: 16 hosts, 2 repetitions, 5 runs",
    "rules: Snakemake's jobs per rule and when the first and last started, from its log",
]


def print_table(result: dict) -> None:
    start = result["service_start"]
    print(
        f"\n{result['hosts']} hosts ({result['addresses']}), "
        f"storbench parallel settings {result['storbench_parallel_settings']}"
    )
    print(f"service start + ready, median of {start['repetitions']} (s):")
    for name, value in start["start_ready_median_s"].items():
        print(f"  {name:24s} {value:7.2f}")
    for name, value in start["ratios"].items():
        print(f"  {name:24s} {value:7.3f}")
    print(
        f"\nsweep of {result['settings']['runs']} runs (per run: storbench's run cycle, the "
        "anchor's median wall; RSS and PSS: peak, in brackets during the runs)"
    )
    print(
        f"{'':20s} {'wall s':>7s} {'per run':>8s} {'ratio':>6s} {'skew med/max s':>15s}"
        f" {'CPU s':>7s} {'RSS MiB':>16s} {'PSS MiB':>16s}"
    )
    for execution, mode in result["sweep"].items():
        for name, part in (("storbench", mode["storbench"]), ("anchor", mode["anchor"])):
            skew = part["start_skew_s"]
            skew_text = (
                f"{skew['median']:.3f}/{skew['max']:.3f}" if skew["median"] is not None else "-"
            )
            cost = part["controller"]
            rss, pss = f"{cost['peak_rss_mib']:.1f}", f"{cost['peak_pss_mib']:.1f}"
            if name == "storbench":
                per_run = part["run_cycle_median_s"] or part["wall_per_run_s"]
                ratio_text = f"{mode['ratios']['run_cycle_to_anchor_run']:.2f}"
                rss += f" ({cost['peak_rss_during_runs_mib']:.1f})"
                pss += f" ({cost['peak_pss_during_runs_mib']:.1f})"
            else:
                per_run, ratio_text = part["per_run_wall_median_s"], ""
            print(
                f"{execution + ' ' + name:20s} {part['wall_s']:7.1f} {per_run:8.2f}"
                f" {ratio_text:>6s} {skew_text:>15s} {cost['cpu_s']:7.1f} {rss:>16s} {pss:>16s}"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, help="hosts (default 128; 16 with --quick)")
    parser.add_argument("--quick", action="store_true", help="16 hosts, fewer repetitions")
    parser.add_argument("--runs", type=int, help="runs per mode, 2..10 (default 5)")
    parser.add_argument(
        "--connection", choices=["per-step", "persistent", "tree"], default="persistent",
        help="how the sweep's campaigns reach the hosts (default persistent)",
    )  # fmt: skip
    parser.add_argument(
        "--gateways", type=int, default=0,
        help="with --connection tree: this many more sshd as ClusterShell gateways",
    )  # fmt: skip
    parser.add_argument("--start-only", action="store_true", help="service start only, no sweep")
    parser.add_argument(
        "--modes", nargs="+", choices=["service", "standalone"], default=["service", "standalone"],
        help="the sweep's execution modes (default both)",
    )  # fmt: skip
    parser.add_argument(
        "--rate-iops", type=int,
        help="the sweep's job offers this rate per host (fio rate_iops): hosts that started "
        "leave the cores to those still starting, as hosts with cores of their own do",
    )  # fmt: skip
    options = parser.parse_args()
    settings = dict(QUICK if options.quick else FULL, quick=options.quick)
    settings["start_only"] = options.start_only
    settings["connection"] = options.connection
    settings["gateways"] = options.gateways
    settings["modes"] = options.modes
    settings["job"] = dict(JOB, rate_iops=options.rate_iops) if options.rate_iops else JOB
    if (options.connection == "tree") != (options.gateways > 0):
        parser.error("--connection tree and --gateways N (N >= 1) go together")
    if options.hosts:
        settings["hosts"] = options.hosts
    if options.runs:
        if not 2 <= options.runs <= len(BLOCK_SIZES):
            parser.error(f"--runs: 2..{len(BLOCK_SIZES)}")
        settings["runs"] = options.runs
    result = measure(settings)
    name = "scale-start" if options.start_only else "scale"
    if options.hosts and options.hosts != FULL["hosts"] and not options.quick:
        name += f"-{options.hosts}"  # the 128-host result (the README's) is kept
    if options.gateways:
        name += f"-tree{options.gateways}"
    if options.rate_iops:
        name += f"-rate{options.rate_iops}"
    if len(options.modes) == 1:
        name += f"-{options.modes[0]}"
    write_json(OUT / f"{name}.json", result)
    print_table(result)
    if not os.environ.get("BENCH_KEEP"):  # BENCH_KEEP=1 keeps the lab and campaign folders
        shutil.rmtree(WORK, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
