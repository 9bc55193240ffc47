"""Result ingestion: storbench's parse rate of a large real fio json+ output vs json.load.

The output is made here by real fio in client/server mode on loopback: one fio server per
host on 127.0.0.70, .71, ... (port 18790), each running a job with two sections (randread,
randrw 70/30) of numjobs clones reported one by one (group_reporting=0), 2 I/Os in flight,
50 IOPS each for 4 s on one shared 16 MiB file per host, lat_percentiles=1, so every clone
carries its latency histogram bins. The client's json+ file, with the manifest a service-mode
run writes beside it, is then ingested by storbench.analysis.ingest.iteration_rows (the parse step
of the workflow: read, decode, rows per host and clone, the 'all' rows from merged bins),
and the same JSON document by json.load alone. fio's client output interleaves
'<host> ...' text lines with the JSON, which json.load rejects, so json.load reads the
document with those lines removed (as bench-fio does); its size is reported too.
Writes bench/out/ingest.json: sizes, rows, the median seconds and MB/s of each, the ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import OUT, median_seconds, print_table, write_result

from storbench.analysis import ingest

WORK = OUT / "ingest-work"
TARGET = Path("/var/tmp/storbench/bench-ingest")
FIRST_ADDRESS = 70  # 127.0.0.70 on: clear of the lab (.2-5), services (.10-41), dispatch (.50-57)
PORT = 18790
READY_TIMEOUT_S = 20.0
MB = 1e6

JOB_TEMPLATE = """\
[global]
filename={directory}/shared.dat
ioengine=libaio
direct=1
size=16m
bs=4k
iodepth=2
runtime=4s
time_based=1
thread=1
group_reporting=0
lat_percentiles=1
numjobs={numjobs}
rate_iops=50

[randread]
rw=randread

[randrw]
rw=randrw
rwmixread=70
"""


@contextlib.contextmanager
def fio_servers(addresses: list[str]):
    """One `fio --server` per loopback address, stopped (by process group) on exit."""
    servers = []
    try:
        for address in addresses:
            command = ["fio", f"--server=ip:{address},{PORT}"]
            servers.append(subprocess.Popen(command, start_new_session=True))
        for address in addresses:
            wait_until_answering(address)
        yield
    finally:
        for server in servers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGTERM)
        for server in servers:
            server.wait(timeout=30)


def wait_until_answering(address: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        try:
            with socket.create_connection((address, PORT), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"fio server on {address}:{PORT} not answering") from None
            time.sleep(0.1)


def host_names(addresses: list[str]) -> dict[str, str]:
    """{endpoint: host name}, as a service-mode manifest maps them."""
    return {f"{address}:{PORT}": f"client{k + 1:02d}" for k, address in enumerate(addresses)}


def generate_output(raw_dir: Path, hosts: int, numjobs: int) -> Path:
    """Run the fio client against every server; the path of its json+ output."""
    addresses = [f"127.0.0.{FIRST_ADDRESS + k}" for k in range(hosts)]
    raw_dir.mkdir(parents=True)
    command = ["fio", "--output-format=json+", f"--output={raw_dir / 'controller.json'}"]
    for address, name in zip(addresses, host_names(addresses).values(), strict=True):
        directory = TARGET / name
        directory.mkdir(parents=True, exist_ok=True)
        job = raw_dir / f"{name}.fio"
        job.write_text(JOB_TEMPLATE.format(directory=directory, numjobs=numjobs))
        command += [f"--client=ip:{address},{PORT}", str(job)]
    with fio_servers(addresses):
        done = subprocess.run(command, cwd=raw_dir, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"fio client exited {done.returncode}: {done.stderr[-2000:]}")
    write_manifest(raw_dir.parent / "run.json", raw_dir, addresses, command, numjobs)
    return raw_dir / "controller.json"


def write_manifest(
    path: Path, raw_dir: Path, addresses: list[str], command: list[str], numjobs: int
) -> None:
    """The manifest a service-mode run leaves: what iteration_rows reads besides the output."""
    now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    hosts = [
        {
            "name": name,
            "endpoint": endpoint,
            "command": command,
            "exit_code": 0,
            "start_time": now,
            "end_time": now,
            "output": "controller.json",
        }
        for endpoint, name in host_names(addresses).items()
    ]
    manifest = {
        "experiment": "ingest",
        "run_id": "ingest",
        "iteration": 1,
        "attempt": 1,
        "tool": "fio",
        "execution": "service",
        "params": {"bs": "4k", "iodepth": 2, "numjobs": numjobs, "rate_iops": 50, "runtime": "4s"},
        "job_file": "job.fio",
        "job_file_sha256": "",
        "raw_dir": raw_dir.name,
        "controller": {"output": "controller.json"},
        "hosts": hosts,
        "target": {"name": "ingest", "type": "directory", "path": str(TARGET)},
    }
    path.write_text(json.dumps(manifest, indent=2))


def json_document(raw_output: Path) -> Path:
    """The output without fio's '<host> ...' text lines: what json.load accepts."""
    lines = raw_output.read_text().splitlines(keepends=True)
    document = raw_output.with_name("document.json")
    document.write_text("".join(line for line in lines if not line.startswith("<")))
    return document


def json_load(path: Path) -> dict:
    with open(path) as file:
        return json.load(file)


def measure(manifest: Path, raw_output: Path, repeat: int) -> dict:
    document = json_document(raw_output)
    parsed = json_load(document)

    def parse():
        return ingest.iteration_rows(str(manifest))

    rows, _ = parse()
    storbench_s, storbench_all = median_seconds(parse, repeat)
    json_s, json_all = median_seconds(lambda: json_load(document), repeat)
    with tempfile.TemporaryDirectory() as scratch:
        parquet = Path(scratch) / "it1.parquet"
        parquet_s, _ = median_seconds(
            lambda: ingest.parse_iteration(str(manifest), str(parquet)), repeat
        )
    raw_mb = raw_output.stat().st_size / MB
    document_mb = document.stat().st_size / MB
    return {
        "file_mb": round(raw_mb, 2),
        "json_document_mb": round(document_mb, 2),
        "client_stats_entries": len(parsed["client_stats"]),
        "rows": len(rows),
        "rows_per_host": sum(row["host"] != "all" for row in rows),
        "rows_all": sum(row["host"] == "all" for row in rows),
        "rows_with_bins": sum(bool(row["hist_ns"]) for row in rows),
        "repeat": repeat,
        "storbench_parse_s": round(storbench_s, 4),
        "json_load_s": round(json_s, 4),
        "storbench_parse_to_parquet_s": round(parquet_s, 4),
        "storbench_mb_s": round(raw_mb / storbench_s, 1),
        "json_load_mb_s": round(document_mb / json_s, 1),
        "storbench_parse_to_parquet_mb_s": round(raw_mb / parquet_s, 1),
        "ratio_storbench_to_json_load_time": round(storbench_s / json_s, 2),
        "every_storbench_parse_s": [round(s, 4) for s in storbench_all],
        "every_json_load_s": [round(s, 4) for s in json_all],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=4, help="fio servers on loopback")
    parser.add_argument("--numjobs", type=int, default=64, help="clones per job section")
    parser.add_argument("--repeat", type=int, default=5, help="timed parses; median reported")
    parser.add_argument("--quick", action="store_true", help="2 hosts x 16 clones, 3 repeats")
    args = parser.parse_args()
    if args.quick:
        args.hosts, args.numjobs, args.repeat = 2, 16, 3
    shutil.rmtree(WORK, ignore_errors=True)
    raw_output = generate_output(WORK / "raw" / "a1", args.hosts, args.numjobs)
    result = {
        "hosts": args.hosts,
        "jobs_per_host": 2 * args.numjobs,
        "fio_version": subprocess.run(
            ["fio", "--version"], capture_output=True, text=True
        ).stdout.strip(),
        **measure(WORK / "raw" / "run.json", raw_output, args.repeat),
        "entry_point": "storbench.analysis.ingest.iteration_rows (manifest -> rows, host all)",
        "json_load_input": "the same output without fio's '<host>' text lines",
    }
    write_result("ingest", result)
    print_table(
        f"ingestion of fio json+, {args.hosts} hosts x {2 * args.numjobs} jobs",
        [
            ("file MB", result["file_mb"]),
            ("rows", result["rows"]),
            ("storbench MB/s", result["storbench_mb_s"]),
            ("json.load MB/s", result["json_load_mb_s"]),
            ("storbench / json.load time", result["ratio_storbench_to_json_load_time"]),
        ],
    )
    shutil.rmtree(WORK, ignore_errors=True)
    shutil.rmtree(TARGET, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
