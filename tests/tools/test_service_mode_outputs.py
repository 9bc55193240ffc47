"""Service-mode runs of elbencho, warp and GOSBench on four sshd lab hosts, as storbench ran
them (tests/fixtures/<tool>/storbench-*/README.md): the rows equal the tools' own numbers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from storbench.analysis.ingest import iteration_rows

FIXTURES = Path(__file__).parent.parent / "fixtures"
HOSTS = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
MIB = 1 << 20


def staged(tmp_path: Path, fixture: str) -> Path:
    """The fixture in the layout the workflow left it in: raw/<run>/it1 and jobs/<run>/."""
    source = FIXTURES / fixture
    manifest = json.loads((source / "run.json").read_text())
    iteration = tmp_path / "raw" / manifest["run_id"] / "it1"
    shutil.copytree(source / "a1", iteration / "a1")
    shutil.copy(source / "run.json", iteration / "run.json")
    job = (iteration / manifest["job_file"]).resolve()
    job.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source / Path(manifest["job_file"]).name, job)
    return iteration / "run.json"


def by_host(rows: list[dict], op: str) -> dict:
    return {row["host"]: row for row in rows if row["op"] == op}


def test_elbencho_service_rows_per_host_from_each_service_and_totals_from_elbencho(tmp_path):
    rows, series = iteration_rows(
        str(staged(tmp_path, "elbencho/storbench-service-4hosts-dir")), with_timeseries=True
    )
    writes = by_host(rows, "write")
    assert sorted(writes) == [*HOSTS, "all"]
    # each host: its service's LAST DONE column (127.0.0.5.service.log: IOPS 1494, 32 MiB)
    assert writes["127.0.0.5"]["iops"] == 1494 and writes["127.0.0.5"]["bytes"] == 32 * MIB
    assert writes["127.0.0.3"]["iops"] == 1758 and writes["127.0.0.3"]["duration_s"] == 0.018
    assert {writes[h]["pct_source"] for h in HOSTS} == {None}  # a service prints no latency
    # 'all': elbencho's own totals (results.csv WRITE row), latency from its merged histogram
    assert writes["all"]["iops"] == 5979 and writes["all"]["bytes"] == 128 * MIB
    assert writes["all"]["pct_source"] == "histogram"
    assert {row["hosts_in_run"] for row in rows} == {4}
    assert {row["bs"] for row in rows if row["op"] == "write"} == {MIB}
    assert {row["host"] for row in series or []} <= {*HOSTS, "all"}


def test_elbencho_service_second_iteration_reads_only_its_own_log_part(tmp_path):
    rows, _ = iteration_rows(str(staged(tmp_path, "elbencho/storbench-service-4hosts-file")))
    reads = by_host(rows, "read")
    log = (FIXTURES / "elbencho/storbench-service-4hosts-file/a1/127.0.0.3.service.log").read_text()
    assert log.count("LABEL: randread_bs4k_qd4_nj2") == 1  # iteration 2's part of the log
    assert reads["127.0.0.3"]["iops"] == 1440225 and reads["127.0.0.3"]["bytes"] == 16 * MIB
    assert reads["all"]["iops"] == 1160011 and reads["all"]["bytes"] == 64 * MIB


def test_warp_distributed_rows_per_client_and_the_sum(tmp_path):
    rows, series = iteration_rows(
        str(staged(tmp_path, "warp/storbench-distributed-4clients")), with_timeseries=True
    )
    puts = by_host(rows, "write")
    clients = sorted(h for h in puts if h != "all")
    assert clients == [
        "warp-client-0kFy",
        "warp-client-6HRV",
        "warp-client-oe0F",
        "warp-client-xGVk",
    ]
    # warp's per-client throughput (analyze.json throughput_by_client): 1431 objects in 5013 ms
    assert puts["warp-client-0kFy"]["ios"] == 1431
    assert puts["warp-client-0kFy"]["iops"] == pytest.approx(1431 / 5.013)
    assert puts["warp-client-0kFy"]["bw_bytes_s"] == pytest.approx(93782016 / 5.013)
    # 'all' sums the clients: 5751 requests, as warp's total_requests says
    assert puts["all"]["ios"] == 5751 and puts["all"]["bytes"] == 376897536
    assert puts["all"]["bw_bytes_s"] == pytest.approx(sum(puts[c]["bw_bytes_s"] for c in clients))
    assert puts["all"]["pct_source"] is None  # never an average of the clients' percentiles
    # warp's own merged total is kept beside the sum: its console printed 'Average: 25.69 MiB/s'
    assert f"{puts['all']['tool_bw_bytes_s'] / MIB:.2f}" == "25.69"
    assert {row["hosts_in_run"] for row in rows} == {4}
    assert series and {row["host"] for row in series} == {"all"}


def test_gosbench_service_rows_per_worker_and_gosbenchs_sum(tmp_path):
    rows, _ = iteration_rows(str(staged(tmp_path, "gosbench/storbench-service-4workers")))
    writes = by_host(rows, "write")
    assert sorted(writes) == [*HOSTS, "all"]
    # 127.0.0.3's worker: PROM VALUES Operations:991 Bytes:4.059136e+06 Duration:4.003378306s
    worker = writes["127.0.0.3"]
    assert worker["ios"] == 991 and worker["bytes"] == 4059136
    assert worker["duration_s"] == pytest.approx(4.003378306)
    assert worker["lat_mean_ns"] == pytest.approx(7.557013118062563e6)
    # 'all': the server's PERF RESULTS (Total Operations=4073, the sum of the four workers)
    assert writes["all"]["ios"] == 4073 == sum(writes[h]["ios"] for h in HOSTS)
    assert writes["all"]["bw_bytes_s"] == pytest.approx(4.160953506107256e6)


def test_gosbench_service_rows_keep_their_own_hosts_gosbench_build(tmp_path):
    """A worker's rows carry the version its host printed; 'all' (the server's sum over every
    worker) joins the hosts' versions where they differ."""
    run = staged(tmp_path, "gosbench/storbench-service-4workers")
    same = "gosbench server sha256:28bb79294424 worker sha256:18086daa2cb0"
    other = "gosbench server sha256:28bb79294424 worker sha256:a74a002bed96"
    for manifest_path in (run, run.parent / "a1/manifest.json"):
        manifest = json.loads(manifest_path.read_text())
        for host in manifest["hosts"]:
            host["tool_version"] = other if host["name"] == "127.0.0.5" else same
        manifest_path.write_text(json.dumps(manifest))
    rows, _ = iteration_rows(str(run))
    assert {(row["host"], row["tool_version"]) for row in rows} == {
        *((host, same) for host in HOSTS[:3]),
        ("127.0.0.5", other),
        ("all", f"{same}; {other}"),
    }


def test_vdbench_multihost_rows_per_host_from_its_host_reports_and_the_masters_totals(tmp_path):
    """vdbench 5.04.06 built from source: one master, four slaves over ssh (README there)."""
    rows, series = iteration_rows(
        str(staged(tmp_path, "vdbench/storbench-service-4hosts")), with_timeseries=True
    )
    reads, writes = by_host(rows, "read"), by_host(rows, "write")
    assert sorted(reads) == sorted(writes) == [*HOSTS, "all"]
    # hd2 (system=127.0.0.3), hd2.html: avg_2-4 217004.75 i/o per s, read pct 69.94,
    # read resp 0.003 ms, write resp 0.012 ms
    host = reads["127.0.0.3"]
    assert host["iops"] == pytest.approx(217004.75 * 0.6994)
    assert host["bw_bytes_s"] == pytest.approx(217004.75 * 0.6994 * 4096)
    # vdbench 5.04.06's "avg_2-4" is the mean of intervals 1-4 ((201858 + 149760 + 311015 +
    # 205386) / 4 = 217004.75): 4 s of I/O
    assert host["lat_mean_ns"] == pytest.approx(3000) and host["duration_s"] == 4.0
    assert writes["127.0.0.3"]["lat_mean_ns"] == pytest.approx(12000)
    # hd2.histogram.html splits the host's reads from its writes: 607,058 reads (the rates
    # say 217004.75 x 69.94 % x 4 s = 607,092), 99.8766 % under 0.020 ms, 99.9010 % under 0.060
    assert host["ios"] == 607058 and host["pct_source"] == "histogram"
    assert (host["p99_ns"], host["p99_9_ns"]) == (20000, 60000)
    assert writes["127.0.0.3"]["ios"] == 260961
    # 5.04.06 gives a mixed run no per-op max or std
    assert host["lat_max_ns"] is None and host["lat_stdev_ns"] is None
    # 'all': the master's flatfile (avg_2-4 rate 1059335, read% 69.9687), the hosts' sum
    total = reads["all"]["iops"] + writes["all"]["iops"]
    assert (
        total == pytest.approx(1059335) == sum(reads[h]["iops"] + writes[h]["iops"] for h in HOSTS)
    )
    assert reads["all"]["iops"] == pytest.approx(1059335 * 0.699687)
    assert writes["all"]["lat_mean_ns"] == pytest.approx(9100)
    # its histogram.html counts the same four intervals: 2,964,811 reads, the I/O count;
    # 2,961,754 of them under 0.020 ms (99.897 %), 99.916 % under 0.040 ms
    assert reads["all"]["ios"] == 2964811 and reads["all"]["pct_source"] == "histogram"
    assert (reads["all"]["p99_ns"], reads["all"]["p99_9_ns"]) == (20000, 40000)
    assert {row["errors"] for row in rows if row["host"] == "all"} == {0}
    assert {row["errors"] for row in rows if row["host"] != "all"} == {None}
    assert {row["tool_version"] for row in rows} == {"vdbench50406"}
    assert {(row["rw"], row["bs"], row["iodepth"]) for row in rows} == {("randrw", 4096, 2)}
    assert series and {row["host"] for row in series} == {"all"}


def test_a_multihost_vdbench_output_imported_alone_names_its_hosts_by_address(tmp_path):
    import pyarrow.parquet as pq

    from storbench.cli import main

    output = FIXTURES / "vdbench/storbench-service-4hosts/a1/controller.vdbench"
    assert main(["import", str(output), "-o", str(tmp_path / "rows.parquet")]) == 0
    rows = pq.read_table(tmp_path / "rows.parquet").to_pylist()
    reads = by_host(rows, "read")
    # parmfile.html: hd=hd1,system=127.0.0.2 ... hd=hd4,system=127.0.0.5
    assert sorted(reads) == [*HOSTS, "all"]
    assert reads["127.0.0.4"]["iops"] == pytest.approx(478530.50 * 0.7001)  # hd3.html
    assert {row["run_id"] for row in rows} == {"rd1"}


def test_vdbench_5_04_06_reads_only_take_max_and_std_from_its_all_ops_columns(tmp_path):
    """Without 5.04.07's read_max ... write_std, resp_max and resp_std are the reads' when
    every I/O was a read."""
    rows, _ = iteration_rows(str(staged(tmp_path, "vdbench/storbench-service-4hosts-read")))
    reads = by_host(rows, "read")
    assert sorted(reads) == [*HOSTS, "all"] and not by_host(rows, "write")
    # hd2.html avg_2-4: 363950.50 i/o per s, resp max 468.007 ms, resp stddev 0.571 ms
    assert reads["127.0.0.3"]["iops"] == 363950.50
    assert reads["127.0.0.3"]["lat_max_ns"] == pytest.approx(468.007e6)
    assert reads["127.0.0.3"]["lat_stdev_ns"] == pytest.approx(0.571e6)
    # flatfile avg_2-4: 1655160 i/o per s, resp_max 468.0070 (the slowest host's), std 0.3445
    assert reads["all"]["iops"] == 1655160 == sum(reads[h]["iops"] for h in HOSTS)
    assert reads["all"]["lat_max_ns"] == pytest.approx(468.007e6)
    assert reads["all"]["lat_stdev_ns"] == pytest.approx(0.3445e6)
    # a host's histogram report of a run of reads only: 'Reads and writes:' are its reads
    # (hd2.histogram.html: 1,455,802 I/Os, 363950.50 x 4 s = 1,455,802)
    assert reads["127.0.0.3"]["ios"] == 1455802 and reads["127.0.0.3"]["pct_source"] == "histogram"
    assert reads["127.0.0.3"]["p99_9_ns"] == 60000


def test_a_vdbench_for_loop_on_many_hosts_gives_each_host_a_row_per_loop_value(tmp_path):
    """forxfersize=(4k,64k) on four hosts: one table per loop value in each host report."""
    rows, _ = iteration_rows(str(staged(tmp_path, "vdbench/storbench-service-4hosts-forxfersize")))
    reads = {(row["job"], row["host"]): row for row in rows if row["op"] == "read"}
    assert sorted(reads) == [
        (job, host) for job in ("rd1_xfersize-4k", "rd1_xfersize-64k") for host in [*HOSTS, "all"]
    ]
    # hd2.html: avg_2-3 107915.67 I/O per s at 4k (read pct 69.92), 50426.00 at 64k (69.80)
    small, large = reads["rd1_xfersize-4k", "127.0.0.3"], reads["rd1_xfersize-64k", "127.0.0.3"]
    assert small["iops"] == pytest.approx(107915.67 * 0.6992) and small["bs"] == 4096
    assert large["iops"] == pytest.approx(50426.00 * 0.6980) and large["bs"] == 65536
    # hd2.histogram.html, one section per loop value: 226,368 reads at 4k, 99.4191 % of them
    # under 0.800 ms; 105,589 at 64k, 99.0491 % under 0.040 ms
    assert (small["ios"], small["p99_ns"]) == (226368, 800000)
    assert (large["ios"], large["p99_ns"]) == (105589, 40000)
    # the flatfile's 64k avg_2-3 is the mean of intervals 1-3: (121179 + 201748 + 190842) / 3
    # = 171256.33 I/O per s; the four hosts' rows sum to it
    everything = [row for row in rows if row["job"] == "rd1_xfersize-64k"]
    total = sum(row["iops"] for row in everything if row["host"] == "all")
    assert total == pytest.approx(171256.3333)
    assert sum(row["iops"] for row in everything if row["host"] != "all") == pytest.approx(
        total, rel=1e-5
    )
    assert {row["duration_s"] for row in rows} == {3.0}


def test_vdbench_filesystem_multihost_rows_per_host_from_its_host_reports(tmp_path):
    """A file-system (FSD/FWD) run of vdbench 5.04.06: one master, four slaves over ssh. Its
    flatfile has no <op>_resp_max/<op>_resp_std columns (storbench refused the run), and its
    host reports have the file-system table (their rows were missing)."""
    rows, series = iteration_rows(
        str(staged(tmp_path, "vdbench/storbench-service-4hosts-fsd")), with_timeseries=True
    )
    reads, writes = by_host(rows, "read"), by_host(rows, "write")
    assert sorted(reads) == sorted(writes) == [*HOSTS, "all"]
    # hd2.html avg_2-4: read rate 97822, resp 0.001 ms, MB/sec read 382.1; write rate 42070,
    # resp 0.008 ms; its ReqstdOps 139892 the mean of intervals 1-4 (107362 + 30016 +
    # 283342 + 138850) / 4 = 139892.5, printed rounded: 4 s of operations
    host = reads["127.0.0.3"]
    assert host["iops"] == 97822 and host["lat_mean_ns"] == pytest.approx(1000)
    assert host["bw_bytes_s"] == pytest.approx(382.1 * MIB)
    assert host["duration_s"] == 4.0 and host["ios"] == 97822 * 4
    assert writes["127.0.0.3"]["iops"] == 42070
    assert writes["127.0.0.3"]["lat_mean_ns"] == pytest.approx(8000)
    assert host["pct_source"] is None  # vdbench writes no file-system host histogram
    # 'all': the flatfile's avg_2-4, the mean of intervals 1-4 ((421799 + 593477 + 718797 +
    # 758174) / 4 = 623061.75 operations per s): Read_rate 435848.25, Write_rate 187213.50
    assert reads["all"]["iops"] == 435848.25 and writes["all"]["iops"] == 187213.50
    assert reads["all"]["duration_s"] == 4.0 and reads["all"]["ios"] == round(435848.25 * 4)
    assert reads["all"]["bw_bytes_s"] == pytest.approx(1702.5410 * MIB)
    assert reads["all"]["lat_mean_ns"] == pytest.approx(1400)
    # the hosts' rates, printed rounded, sum to the master's
    assert sum(reads[h]["iops"] for h in HOSTS) == pytest.approx(435848.25, abs=2)
    # no per-op max or std in 5.04.06; one histogram of all operations: no split by op
    assert reads["all"]["lat_max_ns"] is None and reads["all"]["pct_source"] is None
    assert {row["errors"] for row in rows if row["host"] == "all"} == {0}
    assert {row["errors"] for row in rows if row["host"] != "all"} == {None}
    assert {(row["rw"], row["numjobs"], row["tool_version"]) for row in rows} == {
        ("randrw", 2, "vdbench50406")
    }
    assert series and {row["host"] for row in series} == {"all"}


def test_vdbench_filesystem_reads_only_take_the_masters_histogram(tmp_path):
    rows, _ = iteration_rows(str(staged(tmp_path, "vdbench/storbench-service-4hosts-fsd-read")))
    reads = by_host(rows, "read")
    assert sorted(reads) == [*HOSTS, "all"] and not by_host(rows, "write")
    assert [reads[h]["iops"] for h in HOSTS] == [180313, 262022, 226164, 165143]  # hdN.html
    # histogram.html 'Total of all requested operations:' counts intervals 1-4: 3,334,572
    # operations (833643.25 x 4 s = 3,334,573), 99.9520 % under 0.020 ms
    assert reads["all"]["ios"] == 3334572 and reads["all"]["duration_s"] == 4.0
    assert reads["all"]["pct_source"] == "histogram"
    assert (reads["all"]["p50_ns"], reads["all"]["p99_9_ns"]) == (20000, 20000)


def test_a_vdbench_master_of_hosts_named_by_hand_gives_their_rows_not_its_own(tmp_path):
    """vdbench_hosts: the experiment's one host is the master; the hosts it drove are in
    its parameter file only. Their rows were the master's before, summed as 'all'."""
    manifest_path = staged(tmp_path, "vdbench/storbench-service-4hosts")
    manifest = json.loads(manifest_path.read_text())
    manifest["hosts"] = [{**manifest["hosts"][0], "name": "master"}]
    manifest_path.write_text(json.dumps(manifest))
    rows, series = iteration_rows(str(manifest_path), with_timeseries=True)
    reads = by_host(rows, "read")
    assert sorted(reads) == [*HOSTS, "all"]  # by the system= of their hd lines
    assert reads["127.0.0.3"]["iops"] == pytest.approx(217004.75 * 0.6994)
    assert reads["all"]["iops"] == pytest.approx(1059335 * 0.699687)
    assert series and {row["host"] for row in series} == {"all"}


def test_vdbench_multihost_cpu_per_host_and_the_masters_mean(tmp_path):
    rows, _ = iteration_rows(str(staged(tmp_path, "vdbench/storbench-service-4hosts")))
    reads = by_host(rows, "read")
    # hd1.html .. hd4.html, avg_2-4: cpu% sys+u 80.1, 80.3, 80.1, 80.5; sys 47.4, 47.7, 47.3,
    # 47.5 (each host's /proc/stat, all its CPUs)
    host_cpu = {"127.0.0.2": (80.1, 47.4), "127.0.0.3": (80.3, 47.7)}
    host_cpu |= {"127.0.0.4": (80.1, 47.3), "127.0.0.5": (80.5, 47.5)}
    for host, (used, kernel) in host_cpu.items():
        assert (reads[host]["cpu_pct"], reads[host]["cpu_sys_pct"]) == (used, kernel)
        assert reads[host]["cpu_basis"] == "host"
    # 'all': the master's flatfile avg_2-4, cpu_user 32.7793 + cpu_kernel 47.4701 (its
    # cpu_used repeats cpu_user: 32.7793) = 80.2494, totals.html line 18 "80.2  47.5": the
    # mean over the hosts (80.25, 47.475), as storbench's own rule for host CPU has it
    total = reads["all"]
    assert total["cpu_pct"] == pytest.approx(32.7793 + 47.4701)
    assert total["cpu_sys_pct"] == 47.4701
    assert total["cpu_pct"] == pytest.approx(sum(u for u, _ in host_cpu.values()) / 4, abs=0.01)
    assert total["cpu_sys_pct"] == pytest.approx(sum(k for _, k in host_cpu.values()) / 4, abs=0.01)


def test_elbencho_service_cpu_only_in_the_totals_when_the_services_print_none(tmp_path):
    rows, _ = iteration_rows(str(staged(tmp_path, "elbencho/storbench-service-4hosts-file")))
    reads = by_host(rows, "read")
    # controller-elbencho/results.txt line 21, READ: "CPU util % : 87 85" (LAST DONE 85,
    # the mean over the four services); the services' logs print no CPU line (no --cpu)
    assert (reads["all"]["cpu_pct"], reads["all"]["cpu_basis"]) == (85, "host")
    assert {reads[h].get("cpu_pct") for h in HOSTS} == {None}
