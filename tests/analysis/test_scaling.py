"""Scale-out analysis: scaling per client step, slow hosts, start skew, target sets."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from storbench.analysis import scaling
from storbench.cli import main
from storbench.core import results
from storbench.report import figures as report_figures
from tests.paths import FIXTURES

GB = 1e9
MB = 1e6
DATA_PATH = {"client_link": "10Gbit/s", "limits": [{"name": "cluster", "rate": "3GB/s"}]}
PARAMS = json.dumps({"rw": "read", "bs": "1m", "iodepth": 16}, sort_keys=True)


def host_names(count: int) -> list[str]:
    return [f"client{index:02d}" for index in range(1, count + 1)]


def hosts_by_step(counts, group: str = "clients") -> dict:
    return {f"h{n}": [{"name": name, "group": group} for name in host_names(n)] for n in counts}


def row(run_id, host, bw, *, iteration=1, op="read", step=None, hosts=None, **extra) -> dict:
    base = {
        "experiment": "scale",
        "run_id": run_id,
        "iteration": iteration,
        "attempt": 0,
        "tool": "fio",
        "host": host,
        "job": run_id,  # fio names the job after the run
        "op": op,
        "step": step,
        "hosts_in_run": hosts,
        "target": "vast",
        "rw": "read",
        "bs": 1 << 20,
        "iodepth": 16,
        "numjobs": 1,
        "params_json": PARAMS,
        "bw_bytes_s": bw,
        "iops": bw / (1 << 20),
    }
    base.update(extra)
    return base


def stepped_rows(totals: dict[int, list[float]], *, point="read_bs1m_qd16") -> list[dict]:
    """Incremental stepping: per host count the aggregate bandwidth of each iteration,
    shared evenly by the hosts; host rows start one second apart."""
    rows = []
    for count, per_iteration in totals.items():
        run_id, step = f"{point}_h{count}", f"h{count}"
        for iteration, total in enumerate(per_iteration, start=1):
            for index, name in enumerate(host_names(count)):
                start = f"2024-05-01T10:00:0{index}.250+00:00"
                rows.append(
                    row(run_id, name, total / count, iteration=iteration, step=step,
                        hosts=count, start_time=start)
                )  # fmt: skip
            rows.append(
                row(run_id, "all", total, iteration=iteration, step=step, hosts=count,
                    start_skew_s=float(count - 1))
            )  # fmt: skip
    return rows


def table(rows: list[dict]):
    return results.table_from_rows(rows)


def test_scaling_table_with_the_data_path():
    rows = stepped_rows({2: [2.0 * GB, 2.2 * GB], 4: [2.7 * GB, 2.9 * GB]})
    got = scaling.scaling_table(table(rows), DATA_PATH, hosts_by_step([2, 4]))

    assert list(got.columns) == list(scaling.SCALING_COLUMNS)
    assert got["step"].tolist() == ["h2", "h4"]
    assert got["point"].tolist() == ["read_bs1m_qd16"] * 2
    assert got["job"].tolist() == ["read_bs1m_qd16"] * 2  # the job named after the run, unstepped
    assert got["hosts"].tolist() == [2, 4]
    assert got["op_hosts"].tolist() == [2, 4]
    assert got["n"].tolist() == [2, 2]
    assert got["bw_bytes_s_mean"].tolist() == pytest.approx([2.1 * GB, 2.8 * GB], rel=1e-12)
    sd = math.sqrt(2 * (0.1 * GB) ** 2)  # two iterations 0.2 GB/s apart, ddof=1
    assert got["bw_bytes_s_sd"].tolist() == pytest.approx([sd, sd], rel=1e-9)
    assert got["iops_mean"].tolist() == pytest.approx([2.1 * GB / 2**20, 2.8 * GB / 2**20])
    # 2 x 10 Gbit/s = 2.5 GB/s is below the cluster's 3 GB/s; 4 x 10 Gbit/s = 5 GB/s is not.
    assert got["theoretical_bytes_s"].tolist() == [2.5 * GB, 3.0 * GB]
    assert got["bottleneck"].tolist() == ["client links (2 x 10 Gbit/s)", "cluster"]
    assert got["efficiency"].tolist() == pytest.approx([2.1 / 2.5, 2.8 / 3.0], rel=1e-12)
    assert got["efficiency"].tolist() == pytest.approx([0.84, 0.9333333333333333])


def test_scaling_table_without_data_path_has_no_theoretical_values():
    rows = stepped_rows({1: [1.0 * GB], 2: [1.9 * GB]})
    got = scaling.scaling_table(table(rows))
    assert got["bw_bytes_s_mean"].tolist() == [1.0 * GB, 1.9 * GB]
    assert got["theoretical_bytes_s"].isna().all() and got["efficiency"].isna().all()
    assert got["bottleneck"].isna().all()


def test_hosts_come_from_the_step_list_or_the_host_rows_when_hosts_in_run_is_missing():
    rows = [{**r, "hosts_in_run": None} for r in stepped_rows({2: [2.0 * GB], 3: [2.4 * GB]})]
    got = scaling.scaling_table(table(rows), {"client_link": "10GbE"})
    assert got["hosts"].tolist() == [2, 3]  # counted from the host rows
    assert got["theoretical_bytes_s"].tolist() == [2.5 * GB, 3.75 * GB]
    only_aggregates = [r for r in rows if r["host"] == "all"]
    got = scaling.scaling_table(table(only_aggregates), DATA_PATH, hosts_by_step([2, 3]))
    assert got["hosts"].tolist() == [2, 3]  # from the step's host list
    assert got["theoretical_bytes_s"].tolist() == [2.5 * GB, 3.0 * GB]


def test_per_group_link_rates_use_the_hosts_of_the_step():
    rows = stepped_rows({2: [3.0 * GB]})
    steps = {"h2": [{"name": "client01", "group": "fat"}, {"name": "client02", "group": "thin"}]}
    path = {"client_link": {"fat": "100GbE", "thin": "10GbE"}}
    got = scaling.scaling_table(table(rows), path, steps).iloc[0]
    assert got["theoretical_bytes_s"] == 13.75 * GB
    assert got["bottleneck"] == "client links (1 x 10 Gbit/s + 1 x 100 Gbit/s)"
    assert got["efficiency"] == pytest.approx(3.0 / 13.75)


def split_rows() -> list[dict]:
    """Host-level read/write split on 4 hosts: client01-02 read, client03-04 write."""
    rows = []
    for iteration, (read, write) in enumerate([(2.0 * GB, 1.0 * GB), (2.2 * GB, 1.2 * GB)], 1):
        common = {"iteration": iteration, "step": "h4", "hosts": 4}
        for name in host_names(4):
            op, total = ("read", read) if name in ("client01", "client02") else ("write", write)
            rows.append(row("rw_h4", name, total / 2, op=op, **common))
        rows.append(row("rw_h4", "all", read, op="read", **common))
        rows.append(row("rw_h4", "all", write, op="write", **common))
    return rows


def test_host_split_gets_per_op_rows_and_a_combined_row():
    path = {"client_link": "10Gbit/s", "limits": [{"name": "cluster", "rate": "4GB/s"}]}
    got = scaling.scaling_table(table(split_rows()), path, hosts_by_step([4]))
    assert got["op"].tolist() == ["read", "read+write", "write"]
    assert got["hosts"].tolist() == [4, 4, 4]
    assert got["op_hosts"].tolist() == [2, 4, 2]
    assert got["bw_bytes_s_mean"].tolist() == pytest.approx([2.1 * GB, 3.2 * GB, 1.1 * GB])
    # Each op has two 10 Gbit/s clients (2.5 GB/s); together four, capped by the 4 GB/s cluster.
    assert got["theoretical_bytes_s"].tolist() == [2.5 * GB, 4.0 * GB, 2.5 * GB]
    assert got["efficiency"].tolist() == pytest.approx([0.84, 0.8, 0.44])
    assert got["n"].tolist() == [2, 2, 2]


def constant_rows(bandwidth_mb: dict[str, list[float]]) -> list[dict]:
    """Constant stepping, size 1: each host alone, one run per host."""
    rows = []
    for name, per_iteration in bandwidth_mb.items():
        run_id, step = f"read_bs1m_qd16_host-{name}", f"host-{name}"
        for iteration, value in enumerate(per_iteration, start=1):
            for host in (name, "all"):
                rows.append(row(run_id, host, value * MB, iteration=iteration, step=step, hosts=1))
    return rows


FIVE_HOSTS = {
    "client01": [1000, 1000],
    "client02": [990, 1010],
    "client03": [980, 980],
    "client10": [950, 950],
    "client04": [840, 860],
}


def test_slow_hosts_against_the_median():
    got = scaling.slow_hosts(table(constant_rows(FIVE_HOSTS)), 10)
    assert list(got.columns) == list(scaling.SLOW_HOST_COLUMNS)
    assert got["host"].tolist() == ["client01", "client02", "client03", "client04", "client10"]
    assert got["point"].tolist() == ["read_bs1m_qd16"] * 5
    assert got["step"].tolist() == [f"host-{name}" for name in got["host"]]
    assert got["bw_bytes_s_mean"].tolist() == pytest.approx(
        [v * MB for v in (1000, 1000, 980, 850, 950)]
    )
    assert (got["median_bw_bytes_s"] == 980 * MB).all()
    below = [100 * (1 - v / 980) for v in (1000, 1000, 980, 850, 950)]
    assert got["below_median_percent"].tolist() == pytest.approx(below)
    assert got["flagged"].tolist() == [False, False, False, True, False]  # 13.3 % below
    assert got["n"].tolist() == [2] * 5
    # A tighter bound also flags client10, 3.1 % below the median.
    tight = scaling.slow_hosts(table(constant_rows(FIVE_HOSTS)), 3)
    assert tight.loc[tight["flagged"], "host"].tolist() == ["client04", "client10"]


def test_stepping_mode_from_config_or_data():
    assert scaling.stepping_mode(table(constant_rows(FIVE_HOSTS))) == "constant"
    assert scaling.stepping_mode(table(stepped_rows({2: [1.0], 4: [2.0]}))) == "incremental"
    assert scaling.stepping_mode(table([row("r", "all", 1.0)])) is None
    assert scaling.stepping_mode(table([row("r", "all", 1.0)]), {"mode": "constant"}) == "constant"


def test_start_skew_recorded_and_from_host_start_times():
    rows = stepped_rows({2: [1.0 * GB], 4: [2.0 * GB, 2.1 * GB]})
    got = scaling.start_skew(table(rows), 1.5)
    assert list(got.columns) == list(scaling.START_SKEW_COLUMNS)
    assert got["run_id"].tolist() == ["read_bs1m_qd16_h2", "read_bs1m_qd16_h4", "read_bs1m_qd16_h4"]
    assert got["iteration"].tolist() == [1, 1, 2]
    assert got["hosts"].tolist() == [2, 4, 4]
    assert got["start_skew_s"].tolist() == [1.0, 3.0, 3.0]
    assert got["last_host"].tolist() == ["client02", "client04", "client04"]
    assert got["flagged"].tolist() == [False, True, True]

    # Without start_skew_s the skew is the spread of the hosts' own start times.
    unrecorded = [{**r, "start_skew_s": None} for r in rows]
    unrecorded[0]["start_time"] = "2024-05-01T10:00:00.000+00:00"  # client01 of h2 earlier
    got = scaling.start_skew(table(unrecorded), 1.0)
    assert got["start_skew_s"].tolist() == pytest.approx([1.25, 3.0, 3.0])
    assert got["flagged"].tolist() == [True, True, True]


def test_single_host_runs_have_no_start_skew():
    got = scaling.start_skew(table(constant_rows(FIVE_HOSTS)), 1.0)
    assert got.empty and list(got.columns) == list(scaling.START_SKEW_COLUMNS)


def test_target_sets_against_the_sum_of_their_members():
    rows = []
    for target, total in (("a", 1.0 * GB), ("b", 0.8 * GB), ("a+b", 1.5 * GB)):
        run_id = f"read_bs1m_qd16_{target.replace('+', '-')}"
        rows.append(row(run_id, "all", total, target=target))
        rows.append(row(run_id, "all", total + 0.1 * GB, target=target, iteration=2))
    got = scaling.target_table(table(rows))
    assert list(got.columns) == list(scaling.TARGET_COLUMNS)
    assert got["target"].tolist() == ["a", "b", "a+b"]
    assert got["bw_bytes_s_mean"].tolist() == pytest.approx([1.05 * GB, 0.85 * GB, 1.55 * GB])
    assert got["sum_alone_bytes_s"].iloc[:2].isna().all()  # a member alone has no sum
    assert got["sum_alone_bytes_s"].iloc[2] == pytest.approx(1.9 * GB)
    assert got["together_vs_sum"].iloc[2] == pytest.approx(1.55 / 1.9)


def test_point_label_strips_the_step_suffix_only():
    rows = [
        row("seq_h2", "all", 1.0, step="h2", hosts=2),
        row("x_host-c1", "all", 1.0, step="host-c1", hosts=1),
        row("plain_h2", "all", 1.0),  # no step: the run id stays whole
    ]
    prepared = scaling.prepared(table(rows))
    assert prepared["point"].tolist() == ["seq", "x", "plain_h2"]


def test_retried_iterations_count_their_last_attempt():
    rows = stepped_rows({2: [2.0 * GB]})
    rows.append({**rows[-1], "attempt": 1, "bw_bytes_s": 2.4 * GB})
    got = scaling.scaling_table(table(rows), DATA_PATH, hosts_by_step([2]))
    assert got["bw_bytes_s_mean"].tolist() == [2.4 * GB]
    assert got["n"].tolist() == [1]


def test_empty_rows_give_empty_tables():
    empty = results.SCHEMA.empty_table()
    for frame in (
        scaling.scaling_table(empty, DATA_PATH, {}),
        scaling.slow_hosts(empty, 10),
        scaling.start_skew(empty, 1.0),
        scaling.target_table(empty),
    ):
        assert isinstance(frame, pd.DataFrame) and frame.empty


def test_scaling_of_real_fio_runs(tmp_path):
    """Steps h1 and h2 run by real fio (rate-capped reads); the table's numbers are fio's own."""
    import shutil
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    from storbench.tools import fio_json

    if shutil.which("fio") is None:
        pytest.fail("fio is not installed (make test installs it)", pytrace=False)
    data = tmp_path / "data"
    data.write_bytes(bytes(4 << 20))

    def run_fio(run_id: str, host: str) -> tuple[str, str]:
        argv = ["fio", f"--name={run_id}", f"--filename={data}", "--rw=read", "--bs=64k"]
        argv += ["--size=4m", "--time_based", "--runtime=1", "--rate=8m", "--ioengine=psync"]
        argv += ["--output-format=json"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
        return host, done.stdout

    rows, fio_bw = [], {}
    for count in (1, 2):
        run_id, step = f"read_bs64k_h{count}", f"h{count}"
        with ThreadPoolExecutor(count) as pool:
            outputs = list(pool.map(run_fio, [run_id] * count, host_names(count)))
        base = {"experiment": "scale", "run_id": run_id, "iteration": 1, "attempt": 0,
                "tool": "fio", "step": step, "hosts_in_run": count, "target": "tmp",
                "params_json": json.dumps({"rw": "read", "bs": "64k"})}  # fmt: skip
        rows += fio_json.parse_outputs(outputs, base=base)
        fio_bw[step] = sum(json.loads(text)["jobs"][0]["read"]["bw_bytes"] for _, text in outputs)

    path = {"client_link": "100Mbit/s", "limits": [{"name": "nas", "rate": "15MB/s"}]}
    got = scaling.scaling_table(table(rows), path, hosts_by_step([1, 2]))
    assert got["step"].tolist() == ["h1", "h2"]
    assert got["point"].tolist() == ["read_bs64k", "read_bs64k"]
    assert got["bw_bytes_s_mean"].tolist() == [fio_bw["h1"], fio_bw["h2"]]
    assert got["theoretical_bytes_s"].tolist() == [12.5e6, 15e6]
    assert got["bottleneck"].tolist() == ["client links (1 x 100 Mbit/s)", "nas"]
    assert got["efficiency"].tolist() == [fio_bw["h1"] / 12.5e6, fio_bw["h2"] / 15e6]
    assert got["op_hosts"].tolist() == [1, 2]  # from fio's per-host rows


def elbencho_phases(folder: Path) -> dict[str, dict]:
    """elbencho's own last_done of each phase ('READ', 'WRITE') in a results.json."""
    lines = folder.read_text().splitlines()
    return {(doc := json.loads(line))["phase_type"]: doc["last_done"] for line in lines if line}


def imported(tmp_path: Path, tool: str, *fixtures: str) -> pd.DataFrame:
    output = tmp_path / f"{tool}.parquet"
    argv = ["import", "--tool", tool, "--experiment", "e", "-o", str(output)]
    assert main([*argv, *[str(FIXTURES / name) for name in fixtures]]) == 0
    return pq.read_table(output).to_pandas()


def test_imported_runs_with_equal_parameters_stay_apart(tmp_path):
    """dirmode-2t, read-run and svc-2hosts share rw/bs/iodepth/numjobs and have no sweep
    point: each keeps its own row, elbencho's own numbers, n 1 and no sd."""
    rows = imported(tmp_path, "elbencho", "elbencho/dirmode", "elbencho/dirmode-separate-runs",
                    "elbencho/service-2hosts")  # fmt: skip
    got = scaling.scaling_table(rows).set_index(["point", "op"])
    dirmode = elbencho_phases(FIXTURES / "elbencho/dirmode/results.json")
    read = got.loc[("dirmode-2t", "read")]
    assert read["bw_bytes_s_mean"] == int(dirmode["READ"]["bytes/s"]) == 4493696531
    assert read["iops_mean"] == int(dirmode["READ"]["iops"]) == 4285
    write = got.loc[("dirmode-2t", "write")]
    assert write["bw_bytes_s_mean"] == int(dirmode["WRITE"]["bytes/s"]) == 1170244899
    assert got["n"].eq(1).all() and got["bw_bytes_s_sd"].isna().all()
    assert {"dirmode-2t", "read-run", "svc-2hosts"} <= set(got.index.get_level_values("point"))
    targets = scaling.target_table(rows).set_index(["point", "op"])
    assert targets.loc[("dirmode-2t", "read"), "bw_bytes_s_mean"] == 4493696531


def test_phases_that_ran_one_after_another_are_not_summed(tmp_path):
    """elbencho's write phase, then its read phase (storbench service run on 4 hosts): no
    'read+write' row and no per-host bar sums them; fio's randrw mix is still combined."""
    folder = "elbencho/storbench-service-4hosts-file"
    rows = imported(tmp_path, "elbencho", folder)
    phases = elbencho_phases(FIXTURES / folder / "a1/controller-elbencho/results.json")
    got = scaling.scaling_table(rows)
    assert sorted(got["op"]) == ["read", "write"]
    by_op = got.set_index("op")
    assert by_op.loc["read", "iops_mean"] == int(phases["READ"]["iops"]) == 1160011
    assert by_op.loc["write", "iops_mean"] == int(phases["WRITE"]["iops"]) == 878592
    means = report_figures.host_means(rows).set_index(["run_id", "host"])
    # 127.0.0.3's service log, LAST DONE: write 916 MiB/s, read 5625 MiB/s (never 6.86 GB/s).
    assert means.loc[("randread_bs4k_qd4_nj2 · read", "127.0.0.3"), "bw_mean"] == 5898240000
    assert means.loc[("randread_bs4k_qd4_nj2 · write", "127.0.0.3"), "bw_mean"] == 960495616

    fio = imported(tmp_path, "fio", "fio/standalone-group.jsonplus.json")
    document = json.loads((FIXTURES / "fio/standalone-group.jsonplus.json").read_text())
    mix = [job for job in document["jobs"] if job["jobname"] == "randrw-70-30-4k"]
    fio_sum = sum(job[op]["bw_bytes"] for job in mix for op in ("read", "write"))
    got = scaling.scaling_table(fio).set_index(["job", "op"])
    assert got.loc[("randrw-70-30-4k", "read+write"), "bw_bytes_s_mean"] == fio_sum
    assert "read+write" not in set(got.loc["randread-4k"].index)
    bars = report_figures.host_means(fio).set_index("run_id")["bw_mean"]
    assert bars["standalone-group.jsonplus · randrw-70-30-4k"] == fio_sum
    seq = sum(job["read"]["bw_bytes"] for job in document["jobs"] if job["jobname"] == "seqread-1m")
    assert bars["standalone-group.jsonplus · seqread-1m read"] == seq
