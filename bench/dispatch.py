"""Benchmark: per-run dispatch overhead of service mode on 8 loopback sshd hosts.

A real Snakemake campaign (the repo's Snakefile, 2 cores) with execution: service on 8
hosts (127.0.0.50..57, one host group each) sweeps 8 points of 2 s fio runs. Measured:
the campaign's wall time against the sum of the fio runtimes fio itself reports (the
controller JSON's client_stats job_runtime; the hosts run at once, so a run lasts its
longest host), the gaps around and between the runs, and inside each run the delay from
the controller's start to each host's own start stamp. Writes bench/out/dispatch.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO), str(HERE)]

from services import lab_hosts, running_services, session_home, sshd_lab  # noqa: E402

from storbench.core.atomic import write_json  # noqa: E402
from storbench.hosts import services as storbench_services  # noqa: E402

OUT = REPO / "bench" / "out"
WORK = OUT / "dispatch-work"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
ADDRESSES = [f"127.0.0.{last}" for last in range(50, 58)]
PORT = 8765  # fio's service port (storbench.tools.fio default_port)
EXPERIMENT = "dispatch"
RUNTIME_S = 2
SWEEP = {"rw": ["read", "write", "randread", "randwrite"], "bs": ["4k", "64k"]}


def campaign_config(lab, work: Path, connection: str) -> dict:
    hosts = {
        f"client{index}": {
            "transport": "ssh",
            "connection": connection,
            "nodes": server.address,
            "user": "root",
            "port": server.port,
            "identity": str(lab.client_key),
            "known_hosts": str(lab.known_hosts),
            "workdir": str(work / "remote" / server.address),
        }
        for index, server in enumerate(lab.servers, start=1)
    }
    return {
        "hosts": hosts,
        # `scratch`: profiles/default/config.yaml already caps lock_scratch at 1
        "targets": {"scratch": {"type": "directory", "path": str(work / "target")}},
        "experiments": {
            EXPERIMENT: {
                "tool": "fio",
                "hosts": list(hosts),
                "target": "scratch",
                "execution": "service",
                "iterations": 1,
                "job": {"size": "4MiB", "runtime": f"{RUNTIME_S}s", "ioengine": "psync"},
                "sweep": SWEEP,
            }
        },
    }


def run_campaign(campaign: Path, config: dict) -> tuple[datetime.datetime, float]:
    """Run the whole workflow once; return (launch time UTC, wall seconds)."""
    campaign.mkdir(parents=True)
    (campaign / "campaign.yaml").write_text(yaml.safe_dump(config))
    command = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--configfile", "campaign.yaml"]
    command += ["--cores", "2"]
    launched = datetime.datetime.now(datetime.UTC)
    begin = time.monotonic()
    log = campaign / "snakemake.log"
    with open(log, "w") as output:
        process = subprocess.Popen(command, cwd=campaign, stdout=output, stderr=subprocess.STDOUT)
        try:
            code = process.wait(timeout=600)
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
    return launched, wall


def when(iso: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(iso)


def run_record(iteration_dir: Path) -> dict:
    """One run: controller span, fio's own runtime per host, each host's start delay."""
    manifest = json.loads((iteration_dir / "run.json").read_text())
    controller = manifest["controller"]
    runtimes_ms = host_runtimes_ms(
        controller_output(iteration_dir / manifest["raw_dir"] / controller["output"])
    )
    start, end = when(controller["start_time"]), when(controller["end_time"])
    delays = {
        host["name"]: (when(host["start_time"]) - start).total_seconds()
        for host in manifest["hosts"]
        if host["start_time_source"] == "host"
    }
    return {
        "run_id": iteration_dir.parent.name,
        "command": controller["command"],
        "controller_start": controller["start_time"],
        "controller_end": controller["end_time"],
        "controller_s": round((end - start).total_seconds(), 3),
        "fio_runtime_s": round(max(runtimes_ms.values()) / 1000, 3),
        "fio_runtime_ms_per_host": runtimes_ms,
        "host_start_delay_s": {host: round(delay, 3) for host, delay in delays.items()},
        "host_start_delay_median_s": round(statistics.median(delays.values()), 3),
        "host_start_delay_max_s": round(max(delays.values()), 3),
        "host_start_spread_s": round(max(delays.values()) - min(delays.values()), 3),
    }


def controller_output(path: Path) -> dict:
    text = path.read_text()
    return json.loads(text[text.index("{") :])  # fio prints server notes before the JSON


def host_runtimes_ms(output: dict) -> dict[str, int]:
    return {
        entry["hostname"]: entry["job_runtime"]
        for entry in output["client_stats"]
        if entry["jobname"] != "All clients"
    }


def bare_client_loop(hosts: list[dict], runs: list[dict], work: Path) -> dict:
    """The same fio client commands, one after another, against services started once.

    The target is emptied first, so fio lays out its files as in the storbench runs.
    """
    target = work / "target"
    shutil.rmtree(target)
    for host in hosts:
        (target / host["name"]).mkdir(parents=True)
    outputs = work / "bare"
    outputs.mkdir()
    storbench_services.start_services(hosts, "fio", PORT)
    try:
        walls, runtimes = [], []
        begin = time.monotonic()
        for run in runs:
            output = outputs / f"{run['run_id']}.json"
            argv = [
                f"--output={output}" if arg.startswith("--output=") else arg
                for arg in run["command"]
            ]
            started = time.monotonic()
            subprocess.run(argv, check=True, capture_output=True, timeout=120)
            walls.append(time.monotonic() - started)
            runtimes.append(max(host_runtimes_ms(controller_output(output)).values()) / 1000)
        total = time.monotonic() - begin
    finally:
        storbench_services.stop_services(hosts, "fio", PORT)
    return {
        "wall_s": round(total, 2),
        "fio_runtime_sum_s": round(sum(runtimes), 3),
        "per_run_wall_median_s": round(statistics.median(walls), 3),
        "per_run_overhead_s": round((total - sum(runtimes)) / len(runs), 3),
        "per_run_wall_s": [round(wall, 3) for wall in walls],
    }


def analyse(campaign: Path, launched: datetime.datetime, wall: float) -> dict:
    manifests = campaign.glob(f"results/{EXPERIMENT}/raw/*/it1/run.json")
    runs = sorted(
        (run_record(path.parent) for path in manifests), key=lambda run: run["controller_start"]
    )
    if len(runs) != len(SWEEP["rw"]) * len(SWEEP["bs"]):
        raise RuntimeError(f"expected 8 runs, found {len(runs)}")
    finished = launched + datetime.timedelta(seconds=wall)
    starts = [when(run["controller_start"]) for run in runs]
    ends = [when(run["controller_end"]) for run in runs]
    gaps = [(b - a).total_seconds() for a, b in zip(ends, starts[1:], strict=False)]
    cycles = [(b - a).total_seconds() for a, b in zip(starts, starts[1:], strict=False)]
    runtime_sum = sum(run["fio_runtime_s"] for run in runs)
    in_run = [run["controller_s"] - run["fio_runtime_s"] for run in runs]
    return {
        "wall_s": round(wall, 2),
        "runs": len(runs),
        "fio_runtime_sum_s": round(runtime_sum, 3),
        "configured_runtime_sum_s": RUNTIME_S * len(runs),
        "dispatch_overhead_per_run_s": round((wall - runtime_sum) / len(runs), 3),
        "run_cycle_median_s": round(statistics.median(cycles), 3),
        "breakdown_s": {
            "launch_to_first_run": round((starts[0] - launched).total_seconds(), 2),
            "between_runs_total": round(sum(gaps), 2),
            "between_runs_median": round(statistics.median(gaps), 3),
            "in_run_controller_minus_fio_total": round(sum(in_run), 2),
            "in_run_controller_minus_fio_median": round(statistics.median(in_run), 3),
            "last_run_to_finish": round((finished - ends[-1]).total_seconds(), 2),
        },
        "host_start_delay_s": {
            "median_of_runs": round(
                statistics.median(run["host_start_delay_median_s"] for run in runs), 3
            ),
            "max": max(run["host_start_delay_max_s"] for run in runs),
            "spread_median_of_runs": round(
                statistics.median(run["host_start_spread_s"] for run in runs), 3
            ),
        },
        "per_run": runs,
    }


def measure(connection: str) -> dict:
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    load_before = os.getloadavg()
    with sshd_lab(WORK / "lab", ADDRESSES, PORT) as (lab, _):
        config = campaign_config(lab, WORK, connection)
        campaign = WORK / "campaign"
        launched, wall = run_campaign(campaign, config)
        left = running_services(ADDRESSES, PORT)  # the workflow's own stop at its end
        result = analyse(campaign, launched, wall)
        bare = bare_client_loop(lab_hosts(lab, WORK), result["per_run"], WORK)
    for run in result["per_run"]:
        del run["command"]  # long; kept in each run's manifest
    return {
        "hosts": len(ADDRESSES),
        "connection": connection,
        "session_home": str(session_home(WORK / "lab") or "the account's"),
        "addresses": f"{ADDRESSES[0]}..{ADDRESSES[-1]}",
        "sweep": SWEEP,
        "job": config["experiments"][EXPERIMENT]["job"],
        "cores": os.cpu_count(),
        "loadavg_1_5_15": {"before": load_before, "after": os.getloadavg()},
        "services_left_after_workflow": len(left),
        **result,
        "bare_client_loop": bare,
        "storbench_cycle_to_bare_run": round(
            result["run_cycle_median_s"] / bare["per_run_wall_median_s"], 3
        ),
        "notes": [
            "fio_runtime_s per run: the longest host's client_stats job_runtime from the "
            "controller's JSON (measured by fio, not the configured runtime)",
            "dispatch_overhead_per_run_s = (wall - fio_runtime_sum) / runs; the wall time "
            "includes Snakemake start-up, preflight, starting the services, parse, gather "
            "and report (breakdown_s splits it)",
            "host_start_delay: a host's own start stamp (fio exec_prerun on the host) minus "
            "the controller's start_time from the run manifest",
            "run_cycle_median_s: median time from one run's controller start to the next's "
            "(steady state, without Snakemake start-up and the final report)",
            "bare_client_loop: the manifests' own fio client commands run back to back against "
            "services started once (the fio client/server cost without storbench)",
        ],
    }


def print_summary(result: dict) -> None:
    breakdown = result["breakdown_s"]
    delay = result["host_start_delay_s"]
    print(
        f"{result['hosts']} hosts ({result['connection']}), {result['runs']} runs of"
        f" {RUNTIME_S} s, service mode"
    )
    print(f"wall {result['wall_s']:.2f} s, fio runtimes {result['fio_runtime_sum_s']:.2f} s")
    print(f"dispatch overhead per run {result['dispatch_overhead_per_run_s']:.3f} s")
    for name, value in breakdown.items():
        print(f"  {name:36s} {value:8.3f} s")
    bare = result["bare_client_loop"]
    print(
        f"run cycle (controller start to next start) median {result['run_cycle_median_s']:.3f} s;"
        f" bare fio client loop per run {bare['per_run_wall_median_s']:.3f} s"
        f" (ratio {result['storbench_cycle_to_bare_run']:.3f})"
    )
    print(
        f"controller start -> host start: median {delay['median_of_runs']:.3f} s, "
        f"max {delay['max']:.3f} s, spread across hosts {delay['spread_median_of_runs']:.3f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--connection", choices=["per-step", "persistent"], default="persistent",
        help="how the campaign reaches the hosts (default persistent)",
    )  # fmt: skip
    result = measure(parser.parse_args().connection)
    write_json(OUT / "dispatch.json", result)
    print_summary(result)
    if not os.environ.get("BENCH_KEEP"):  # BENCH_KEEP=1 keeps the lab and campaign folders
        shutil.rmtree(WORK, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
