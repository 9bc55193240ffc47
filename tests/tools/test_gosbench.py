"""GOSBench adapter against real gosbench v0.7-1-gf99526c output (see
tests/fixtures/gosbench/README.md)."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from storbench.config import campaign as config
from storbench.core import results
from storbench.core.schema_names import ALL_HOSTS
from storbench.hosts import services
from storbench.plan import specs as plan
from storbench.run import preflight
from storbench.run.render import RenderError, render_job
from storbench.tools import get_tool
from storbench.tools.base import SECRET_PLACEHOLDERS, ToolOutputError
from storbench.tools.base import RenderError as BaseRenderError
from storbench.tools.gosbench import (
    ADAPTER,
    config_test,
    load_results,
    object_size_in_units,
    weights,
)
from tests.manifests import as_manifest
from tests.minio import S3_DEMO_TARGET
from tests.paths import FIXTURES as SHARED_FIXTURES

FIXTURES = SHARED_FIXTURES / "gosbench"
RUN = FIXTURES / "run"
BASE = {"experiment": "s3demo", "iteration": 1, "attempt": 1, "tool": "gosbench", "x": "dropped"}
TARGET = S3_DEMO_TARGET
SPEC = {
    "experiment": "s3demo",
    "run_id": "write_bs4k_nj4",
    "tool": "gosbench",
    "target": TARGET,
    "params": {"rw": "write", "bs": "4k", "numjobs": 4, "runtime": "8s"},
    "point": {"rw": "write"},
    "hosts": ["client01", "client02"],
    "template": None,
    "job_file": None,
}


def by_test(rows: list[dict]) -> dict:
    return {row["job"]: row for row in rows}


# --- the server's results ------------------------------------------------------------------


def test_perf_results_lines():
    results = {r["test"]: r for r in load_results(RUN / "server.console.txt")}
    # server.console.txt: msg="PERF RESULTS" Average BW in Byte/s=1.842606953829623e+06
    # Average latency in ms=17.258561434126328 Test runtime on server=18.199755783s
    # Total Bytes=1.4823424e+07 Total Operations=3619 test=write-4k-8s
    assert results["write-4k-8s"] == {
        "test": "write-4k-8s",
        "bw": 1.842606953829623e06,
        "latency_ms": 17.258561434126328,
        "runtime_s": pytest.approx(18.199755783),
        "bytes": 14823424.0,
        "operations": 3619.0,
    }
    read = results["read-4k-8s"]  # ... Total Operations=11767 test=read-4k-8s
    assert (read["operations"], read["bytes"], read["bw"]) == (
        11767,
        48197632,
        6.020203348382853e06,
    )
    assert read["runtime_s"] == pytest.approx(18.19009679)


def test_console_and_csv_agree_per_test():
    console = {r["test"]: r for r in load_results(RUN / "server.console.txt")}
    table = {r["test"]: r for r in load_results(RUN / "gosbench_results.csv")}
    assert list(console) == list(table) == ["write-4k-8s", "read-4k-8s"]
    for name, printed in console.items():
        written = table[name]  # the CSV keeps 6 decimals
        assert (written["operations"], written["bytes"]) == (
            printed["operations"],
            printed["bytes"],
        )
        for key in ("bw", "latency_ms", "runtime_s"):
            assert written[key] == pytest.approx(printed[key], abs=1e-6)


def test_rows_sum_the_workers_prom_values():
    rows = by_test(ADAPTER.import_outputs([RUN], BASE))
    write = rows["write-4k-8s"]
    # worker1/2.console.txt: PROM VALUES {TestName:write-4k-8s Operations:1719 Bytes:7.041024e+06
    # Bandwidth:874317.2655949245 LatencyAvg:18.135543920884235 Duration:8.0531682s} and
    # {... Operations:1900 Bytes:7.7824e+06 Bandwidth:968289.6882346986 LatencyAvg:16.38157894736842
    # Duration:8.037264152s}
    assert (write["ios"], write["bytes"]) == (1719 + 1900, 7041024 + 7782400)
    assert write["bw_bytes_s"] == pytest.approx(874317.2655949245 + 968289.6882346986)
    assert write["lat_mean_ns"] == pytest.approx((18.135543920884235 + 16.38157894736842) / 2 * 1e6)
    assert write["iops"] == pytest.approx(1719 / 8.0531682 + 1900 / 8.037264152)
    assert write["duration_s"] == pytest.approx(18.199755783)  # 'Test runtime on server'
    read = rows[
        "read-4k-8s"
    ]  # PROM VALUES Operations:5952 ... Duration:8.00494209s, 5815 ... 8.00704412s
    assert read["iops"] == pytest.approx(5952 / 8.00494209 + 5815 / 8.00704412)


def test_rows_describe_the_tests_from_the_config():
    rows = by_test(ADAPTER.import_outputs([RUN], BASE))
    # gosbench-config.yaml: write_weight 100 / read_weight 100, 4 KB constant, 4 clients, 8s
    assert [(r["op"], r["rw"], r["bs"], r["numjobs"], r["runtime_s"]) for r in rows.values()] == [
        ("write", "write", 4096, 4, 8.0),
        ("read", "read", 4096, 4, 8.0),
    ]
    for row in rows.values():
        assert row["host"] == ALL_HOSTS and row["run_id"] == "run" and row["raw_path"] == str(RUN)
        assert row["lat_basis"] == "lat" and row["rwmixread"] is None and "x" not in row


@pytest.mark.parametrize("name", ["server.console.txt", "gosbench_results.csv"])
def test_import_of_one_file_finds_the_config_one_folder_up(name):
    rows = by_test(ADAPTER.import_outputs([RUN / name], BASE))
    assert rows["write-4k-8s"]["ios"] == 3619 and rows["read-4k-8s"]["ios"] == 11767
    assert rows["read-4k-8s"]["raw_path"] == str(RUN / name)


def test_import_with_the_config_given(tmp_path):
    (tmp_path / "server.log").symlink_to(RUN / "server.console.txt")
    with pytest.raises(ToolOutputError, match="no gosbench config with test"):
        ADAPTER.import_outputs([tmp_path / "server.log"], BASE)
    paths = [tmp_path / "server.log", FIXTURES / "gosbench-config.yaml"]
    assert len(ADAPTER.import_outputs(paths, BASE)) == 2


def test_a_mixed_test_is_labelled_mixed_not_one_of_its_ops(tmp_path):
    config = yaml.safe_load((FIXTURES / "gosbench-config.yaml").read_text())
    config["tests"][0].update(read_weight=20, write_weight=70, delete_weight=10)
    path = tmp_path / "mixed.yaml"
    path.write_text(yaml.safe_dump(config))
    rows = by_test(ADAPTER.import_outputs([RUN / "gosbench_results.csv", path], BASE))
    assert (rows["write-4k-8s"]["op"], rows["write-4k-8s"]["rw"]) == ("mixed", "mixed")
    assert rows["write-4k-8s"]["rwmixread"] == 20


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (FIXTURES.parent / "warp" / "warp-put.stderr.txt", "empty file"),
        (RUN / "worker1.console.txt", "no PERF RESULTS line"),
        (RUN / "server.exitcode.txt", "no PERF RESULTS line"),
        (FIXTURES.parent / "fio" / "standalone-group.json", "no PERF RESULTS line"),
        (FIXTURES.parent / "warp" / "warp-get.json.zst", "not text"),
    ],
    ids=lambda value: value.name if isinstance(value, Path) else None,
)
def test_import_rejects_what_is_not_gosbench_output(path, message):
    with pytest.raises(ToolOutputError, match=re.escape(message)) as error:
        ADAPTER.import_outputs([path], BASE)
    assert str(path) in str(error.value)


def test_truncated_perf_results_line(tmp_path):
    lines = (RUN / "server.console.txt").read_text().splitlines()
    perf = next(line for line in lines if "PERF RESULTS" in line)
    path = tmp_path / "server.console.txt"
    path.write_text(perf[: perf.index(" Total Operations")] + "\n")
    with pytest.raises(ToolOutputError, match="lacks operations, test"):
        load_results(path)


def test_csv_errors(tmp_path):
    path = tmp_path / "gosbench_results.csv"
    header = (RUN / "gosbench_results.csv").read_text().splitlines()[0]
    path.write_text(header + "\n")
    with pytest.raises(ToolOutputError, match="without any test"):
        load_results(path)
    path.write_text(header + "\nwrite-4k-8s,3619,14823424\n")
    with pytest.raises(ToolOutputError, match="3 fields"):
        load_results(path)


def test_test_missing_from_the_config(tmp_path):
    config = {"tests": [{"name": "other"}]}
    path = tmp_path / "other.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ToolOutputError, match="no gosbench config"):
        ADAPTER.import_outputs([RUN / "gosbench_results.csv", path], BASE)


# --- parse() from a run's raw folder -------------------------------------------------------


def raw_run(tmp_path: Path, hosts: list[str], workers: int) -> tuple[dict, Path]:
    """Iteration folder with the job file, attempt folder with the first host's output."""
    config = yaml.safe_load((FIXTURES / "gosbench-config.yaml").read_text())
    for test in config["tests"]:
        test["workers"] = workers
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(config))
    output = tmp_path / "a1" / f"{hosts[0]}.gosbench"
    output.mkdir(parents=True)
    (output / "server.console.txt").symlink_to(RUN / "server.console.txt")
    manifest = {
        "job_file": "job.yaml",
        "params": {"bs": "4k"},
        "hosts": [{"name": h, "output": f"{h}.gosbench", "tool_version": "t"} for h in hosts],
    }
    return manifest, tmp_path / "a1"


def test_parse_one_worker_on_the_only_host_gives_host_rows(tmp_path):
    manifest, raw_dir = raw_run(tmp_path, ["client01"], workers=1)
    rows = ADAPTER.parse(as_manifest(manifest), raw_dir, {**BASE, "run_id": "write_bs4k"})
    assert [(r["host"], r["job"]) for r in rows] == [
        ("client01", "write-4k-8s"),
        ("client01", "read-4k-8s"),
        (ALL_HOSTS, "write-4k-8s"),
        (ALL_HOSTS, "read-4k-8s"),
    ]
    assert rows[0]["bw_bytes_s"] == rows[2]["bw_bytes_s"] == 1.842606953829623e06
    assert rows[0]["tool_version"] == "t" and rows[0]["run_id"] == "write_bs4k"


def test_parse_distributed_run_gives_all_rows(tmp_path):
    manifest, raw_dir = raw_run(tmp_path, ["client01", "client02"], workers=2)
    rows = ADAPTER.parse(as_manifest(manifest), raw_dir, BASE)
    assert [(r["host"], r["job"], r["ios"]) for r in rows] == [
        (ALL_HOSTS, "write-4k-8s", 3619),
        (ALL_HOSTS, "read-4k-8s", 11767),
    ]


def test_parse_without_output(tmp_path):
    manifest, raw_dir = raw_run(tmp_path, ["client01"], workers=1)
    manifest["hosts"][0]["output"] = "missing.gosbench"
    with pytest.raises(ToolOutputError, match="expected one gosbench output folder"):
        ADAPTER.parse(as_manifest(manifest), raw_dir, BASE)


# --- config --------------------------------------------------------------------------------

EXPECTED_CONFIG = """\
# storbench experiment s3demo, run write_bs4k_nj4: gosbench config, one test.
# The keys are placeholders: the runner fills them in only in the host's private copy.
s3_config:
  - access_key: '@@STORBENCH_ACCESS_KEY@@'
    secret_key: '@@STORBENCH_SECRET_KEY@@'
    region: "us-east-1"
    endpoint: "http://127.0.0.1:9000"
    skipSSLverify: false
    usePathStyle: true

tests:
  - name: "write_bs4k_nj4"
    read_weight: 0
    existing_read_weight: 0
    write_weight: 100
    delete_weight: 0
    list_weight: 0
    objects:
      size_min: 4
      size_max: 4
      part_size: 0
      size_distribution: constant
      unit: KB
      number_min: 100
      number_max: 100
      number_distribution: constant
    buckets:
      number_min: 1
      number_max: 1
      number_distribution: constant
    bucket_prefix: "storbench-s3demo-"
    object_prefix: "obj"
    stop_with_runtime: 8s
    stop_with_ops: 0
    workers: 2
    workers_share_buckets: true
    parallel_clients: 4
    clean_after: true
"""


def test_config_golden(monkeypatch):
    monkeypatch.setenv("S3_ACCESS_KEY", "fake-access-key-value")
    monkeypatch.setenv("S3_SECRET_KEY", "fake-secret-key-value")
    text = render_job(SPEC)
    assert text == EXPECTED_CONFIG
    argv = " ".join(ADAPTER.command("/w/job.yaml", "/w/client01.gosbench", "client01"))
    for rendered in (text, argv):
        assert "fake-access-key-value" not in rendered and "fake-secret-key-value" not in rendered
    assert SECRET_PLACEHOLDERS["access_key"] in text and SECRET_PLACEHOLDERS["secret_key"] in text


def test_config_has_the_structure_gosbench_ran_with():
    ours = yaml.safe_load(render_job(SPEC))
    theirs = yaml.safe_load((FIXTURES / "gosbench-config.yaml").read_text())
    assert set(ours) == set(theirs) == {"s3_config", "tests"}
    assert set(ours["s3_config"][0]) == set(theirs["s3_config"][0])
    ours_test, theirs_test = ours["tests"][0], theirs["tests"][0]
    assert set(ours_test) == set(theirs_test)
    assert set(ours_test["objects"]) == set(theirs_test["objects"])
    assert set(ours_test["buckets"]) == set(theirs_test["buckets"])
    same = ("objects", "buckets", "write_weight", "read_weight", "parallel_clients", "workers")
    assert {k: ours_test[k] for k in same} == {k: theirs_test[k] for k in same}


def test_config_for_a_read_mix_on_https_without_verification():
    target = {**TARGET, "endpoint": "https://s3.lab", "verify_tls": False, "region": "eu-1"}
    params = {"rw": "randrw", "rwmixread": 70, "bs": "1m", "numjobs": 8, "runtime": "1m",
              "objects": 500, "buckets": 2, "clean_after": False, "part_size": "5m"}  # fmt: skip
    config = yaml.safe_load(render_job({**SPEC, "target": target, "params": params, "hosts": []}))
    s3, test = config["s3_config"][0], config["tests"][0]
    assert (s3["endpoint"], s3["region"], s3["skipSSLverify"]) == ("https://s3.lab", "eu-1", True)
    assert (test["read_weight"], test["write_weight"]) == (70, 30)
    assert test["objects"]["size_min"] == 1 and test["objects"]["unit"] == "MB"
    assert test["objects"]["part_size"] == 5 and test["objects"]["number_max"] == 500
    assert test["buckets"]["number_max"] == 2 and test["clean_after"] is False
    assert (test["stop_with_runtime"], test["workers"], test["parallel_clients"]) == ("60s", 1, 8)


def test_weights():
    assert weights({"rw": "randread"})["read_weight"] == 100
    assert weights({"rw": "rw"}) | {} == {
        "read_weight": 50, "existing_read_weight": 0, "write_weight": 50,
        "delete_weight": 0, "list_weight": 0,
    }  # fmt: skip
    given = weights({"rw": "read", "list_weight": 10, "delete_weight": 5})
    assert (given["read_weight"], given["list_weight"], given["delete_weight"]) == (0, 10, 5)


def test_object_sizes_in_gosbench_units():
    assert object_size_in_units(4096) == (4, "KB")
    assert object_size_in_units(3 * 1024**3) == (3, "GB")
    assert object_size_in_units(1000) == (1000, "B")


@pytest.mark.parametrize(
    ("params", "target", "message"),
    [
        ({"rw": "write", "runtime": "8s"}, TARGET, "set bs"),
        ({"rw": "write", "bs": "4k"}, TARGET, "set runtime or stop_with_ops"),
        ({"rw": "trim", "bs": "4k", "runtime": "8s"}, TARGET, "rw 'trim': gosbench does read,"),
        ({"rw": "writ", "bs": "4k", "runtime": "8s"}, TARGET, "rw 'writ' (did you mean 'write'?)"),
        ({"bs": "4k", "runtime": "8s"}, TARGET, "set rw"),
        ({"read_weight": 0, "bs": "4k", "runtime": "8s"}, TARGET, "every operation weight is 0"),
        ({"rw": "write", "bs": "4k", "runtime": "8s", "part_size": "1000"}, TARGET, "part_size"),
        ({"rw": "read"}, {"name": "s", "type": "directory", "path": "/x"}, "not an s3 target"),
        ({"rw": "read", "bs": "4k", "runtime": "8s"}, {**TARGET, "bucket": "b" * 62}, "longer"),
    ],
)
def test_render_errors(params, target, message):
    with pytest.raises(RenderError, match=re.escape(message)):
        render_job({**SPEC, "params": params, "target": target})


def test_commands():
    assert get_tool("gosbench") is ADAPTER and ADAPTER.target_types == ("s3",)
    assert ADAPTER.has_services and ADAPTER.default_port == 2000 and ADAPTER.output_is_folder
    assert ADAPTER.service_per_run and ADAPTER.worker_port == 8888
    assert ADAPTER.worker_command("10.0.0.1", 2000, 8889) == [
        "gosbench-worker", "-s", "10.0.0.1:2000", "-p", "8889"
    ]  # fmt: skip
    assert ADAPTER.service_stop_command(["h1:2000"]) == []
    argv = ADAPTER.controller_command(["/w/job.yaml"] * 2, "/w/out", ["c:2100", "c:2100"])
    assert argv[3:] == ["storbench-gosbench", "/w/out", "/w/job.yaml", "2100", "2", ""]
    argv = ADAPTER.command("/w/job.yaml", "/w/out", "h1")
    assert argv[3:] == ["storbench-gosbench", "/w/out", "/w/job.yaml", "2000", "1", "8888"]
    assert "github.com/mulbc/gosbench" in ADAPTER.install_hint and ADAPTER.job_suffix == ".yaml"


# --- the command's shell script, with stand-in gosbench binaries ---------------------------

FAKE_SERVER = """\
#!/bin/sh
case $2 in *.yaml) ;; *) echo 'level=fatal msg="Configuration file must be a yaml"'; exit 1 ;; esac
[ -z "$FAIL" ] || { echo 'level=fatal msg="Could not open port!"'; exit 1; }
printf '%s\\n' "$@" > "$ARGS"
tail -n +2 "$CSV" >> gosbench_results.csv
# as gosbench's server: each test's CSV row before the log's last line, which comes only
# once the workers have connected and run the tests
while [ -n "$WORKER_FIRST" ] && [ ! -e "$ARGS.worker" ]; do sleep 0.01; done
cat "$LOG"
exec sleep 600
"""
FAKE_WORKER = """\
#!/bin/sh
printf '%s\\n' "$@" > "$ARGS.worker"
"""


def run_script(tmp_path: Path, argv: list[str], **env_extra) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("gosbench-server", FAKE_SERVER), ("gosbench-worker", FAKE_WORKER)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(stat.S_IRWXU)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "ARGS": str(tmp_path / "args.txt"),
        "LOG": str(RUN / "server.console.txt"),
        "CSV": str(RUN / "gosbench_results.csv"),
        **env_extra,
    }
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)


def test_single_host_command_stops_the_server_after_the_last_test(tmp_path):
    job = tmp_path / "job.yaml.private"  # the runner's private copy: gosbench needs .yaml
    job.write_text("tests: []\n")
    out = tmp_path / "client01.gosbench"
    done = run_script(tmp_path, ADAPTER.command(str(job), str(out), "client01"), WORKER_FIRST="1")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "args.txt").read_text().splitlines() == ["-c", f"{job}.yaml", "-p", "2000"]
    assert (tmp_path / "args.txt.worker").read_text().splitlines() == [
        "-s", "127.0.0.1:2000", "-p", "8888"
    ]  # fmt: skip
    assert not (tmp_path / "job.yaml.private.yaml").exists()  # the link is gone again
    # the CSV was started with gosbench's header, the server appended its rows
    assert (out / "gosbench_results.csv").read_text() == (RUN / "gosbench_results.csv").read_text()
    assert {r["test"]: r for r in load_results(out)}["read-4k-8s"]["operations"] == 11767


def test_controller_command_waits_for_every_worker(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("tests: []\n")
    argv = ADAPTER.controller_command(str(job), str(tmp_path / "out"), ["h1:2000", "h2:2000"])
    assert run_script(tmp_path, argv).returncode == 0
    assert not (tmp_path / "args.txt.worker").exists()  # no worker on the controller


def test_a_server_that_exits_has_failed(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("tests: []\n")
    done = run_script(tmp_path, ADAPTER.command(str(job), str(tmp_path / "out"), "h"), FAIL="1")
    assert done.returncode == 1
    assert "stopped before finishing" in done.stderr and "Could not open port" in done.stderr


def test_rows_fit_the_result_schema():
    table = results.table_from_rows(ADAPTER.import_outputs([RUN], BASE))
    assert table.column("ios").to_pylist() == [3619, 11767]


def test_shipped_example_renders():
    campaign = config.load_campaign_file(
        Path(__file__).resolve().parents[2] / "config/examples/gosbench-s3.yaml"
    )
    for name in campaign.experiments:
        for run in campaign.experiment_runs(name):
            test = yaml.safe_load(render_job(plan.render_spec(campaign, name, run)))["tests"][0]
            assert test["name"] == run.run_id and test["bucket_prefix"].startswith("storbench-")


# sha256 of b"gosbench-server build A\n", b"gosbench-worker build A\n" and b"... build B\n"
SERVER_A = "28bb79294424"
WORKER_A = "18086daa2cb0"
WORKER_B = "a74a002bed96"


def gosbench_binaries(folder: Path, server: bytes, worker: bytes) -> Path:
    """Two files standing in as gosbench's binaries (executable, as PATH needs them)."""
    folder.mkdir(parents=True)
    for name, content in (("gosbench-server", server), ("gosbench-worker", worker)):
        (folder / name).write_bytes(content)
        (folder / name).chmod(stat.S_IRWXU)
    return folder


def version_printed(bin_dir: Path) -> subprocess.CompletedProcess:
    path = f"{bin_dir}:/usr/bin:/bin"
    return subprocess.run(
        ADAPTER.version_command(), env={"PATH": path}, capture_output=True, text=True
    )


def test_version_is_the_content_hash_of_both_binaries(tmp_path):
    # gosbench has no --version flag (README): a build is told by its binaries' content
    missing = subprocess.run(ADAPTER.version_command(), env={"PATH": "/usr/bin:/bin"})
    assert missing.returncode == 127
    a = gosbench_binaries(
        tmp_path / "a", b"gosbench-server build A\n", b"gosbench-worker build A\n"
    )
    again = gosbench_binaries(
        tmp_path / "again", b"gosbench-server build A\n", b"gosbench-worker build A\n"
    )
    b = gosbench_binaries(
        tmp_path / "b", b"gosbench-server build A\n", b"gosbench-worker build B\n"
    )
    printed = [version_printed(folder) for folder in (a, again, b)]
    assert [done.returncode for done in printed] == [0, 0, 0]
    assert [done.stdout for done in printed] == [
        f"gosbench server sha256:{SERVER_A} worker sha256:{WORKER_A}\n",
        f"gosbench server sha256:{SERVER_A} worker sha256:{WORKER_A}\n",  # the same build elsewhere
        f"gosbench server sha256:{SERVER_A} worker sha256:{WORKER_B}\n",  # another worker build
    ]
    assert ADAPTER.version_of(printed[0].stdout) == printed[0].stdout.strip()
    # a service run's hosts need the worker only: the server runs on the controller
    (b / "gosbench-server").unlink()
    worker_only = version_printed(b)
    assert (worker_only.returncode, worker_only.stdout) == (
        0,
        f"gosbench worker sha256:{WORKER_B}\n",
    )
    (a / "gosbench-worker").unlink()
    assert version_printed(a).returncode == 127


def test_a_hosts_kept_version_follows_its_binaries_coming_and_going(tmp_path):
    """The version a host keeps (per identity of both binaries) is asked again once the server
    is added or removed, and is kept on a worker-only host too."""
    bin_dir = gosbench_binaries(
        tmp_path / "bin", b"gosbench-server build A\n", b"gosbench-worker build A\n"
    )
    server = (bin_dir / "gosbench-server").read_bytes()
    (bin_dir / "gosbench-server").unlink()
    kept_in = tmp_path / "kept"
    script = services.kept_version_script(str(kept_in), ADAPTER)

    def printed() -> str:
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
        done = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert printed() == f"gosbench worker sha256:{WORKER_A}\n"
    assert [path.read_text() for path in kept_in.iterdir()] == [printed()]  # kept, read back
    (bin_dir / "gosbench-server").write_bytes(server)
    (bin_dir / "gosbench-server").chmod(stat.S_IRWXU)
    assert printed() == f"gosbench server sha256:{SERVER_A} worker sha256:{WORKER_A}\n"
    assert len(list(kept_in.iterdir())) == 2


def test_a_standalone_run_needs_the_server_on_its_hosts_a_service_run_does_not(
    tmp_path, monkeypatch
):
    standalone = ADAPTER.host_requirements({}, {}, "standalone")
    assert ADAPTER.host_requirements({}, {}, "service") == []
    (requirement,) = standalone
    assert requirement["problem"].startswith("gosbench-server is not on the host's PATH")
    bin_dir = gosbench_binaries(tmp_path / "bin", b"server\n", b"worker\n")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    assert subprocess.run(requirement["argv"], env=env, capture_output=True).returncode == 0
    (bin_dir / "gosbench-server").unlink()
    assert subprocess.run(requirement["argv"], env=env, capture_output=True).returncode != 0
    # the shipped example's two experiments, the second run in service mode: each checked for
    # what its mode runs on its hosts
    example = Path(__file__).resolve().parents[2] / "config/examples/gosbench-s3.yaml"
    raw = yaml.safe_load(example.read_text())
    first, second = raw["experiments"]
    raw["experiments"][second]["execution"] = "service"
    (tmp_path / "campaign.yaml").write_text(yaml.safe_dump(raw))
    campaign = config.load_campaign_file(tmp_path / "campaign.yaml")
    checked = [plan.preflight_spec(campaign, name) for name in (first, second)]
    assert [spec.get("requirements") for spec in checked] == [standalone, None]
    # the service run's server runs on the controller: checked there, the worker not
    assert "controller_requirements" not in checked[0]
    # and its workers dial the controller's server: each host connects to it at preflight
    assert "controller_port" not in checked[0]  # a standalone worker dials its own host
    assert checked[1]["controller_port"] == ADAPTER.default_port == 2000
    (here,) = checked[1]["controller_requirements"]
    assert here["argv"] == ["sh", "-c", "command -v gosbench-server"]
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")  # the worker only, as above
    (problem,) = preflight.controller_problems([here])
    assert "): gosbench-server is not on this machine's PATH (execution: service" in problem
    (bin_dir / "gosbench-worker").rename(bin_dir / "gosbench-server")
    assert preflight.controller_problems([here]) == []


def test_imported_rows_record_no_version():
    # an import has no binary to hash, and gosbench's outputs name no build
    assert {row["tool_version"] for row in ADAPTER.import_outputs([RUN], BASE)} == {None}


def test_keys_with_quotes_survive_the_filled_config():
    """The runner fills keys into the single-quoted YAML: a quote in a key must not end it."""
    text = render_job(SPEC)
    access, secret = "AK'1", "s'e\"c#r:e t/+="
    for placeholder, key in ((SECRET_PLACEHOLDERS["access_key"], access),
                             (SECRET_PLACEHOLDERS["secret_key"], secret)):  # fmt: skip
        text = text.replace(placeholder, ADAPTER.job_file_secret(key))
    s3_config = yaml.safe_load(text)["s3_config"][0]
    assert (s3_config["access_key"], s3_config["secret_key"]) == (access, secret)


def test_an_object_size_range_draws_sizes_at_random():
    """The Virtuozzo guide's 'size_min: 1, size_max: 100000, unit: KB, random'."""
    spec = {"run_id": "r", "params": {"bs": "1k-100000k", "runtime": "900s", "rw": "write"},
            "target": {"bucket": "b"}, "hosts": ["h1", "h2"]}  # fmt: skip
    test = config_test(spec)
    assert (test["size"], test["size_max"], test["unit"]) == (1, 100000, "KB")
    assert test["size_distribution"] == "random" and test["workers"] == 2
    spec["params"]["bs"] = "4k"
    assert config_test(spec)["size_distribution"] == "constant"
    spec["params"]["bs"] = "1m-4k"
    with pytest.raises(BaseRenderError, match="below its start"):
        config_test(spec)


def test_an_option_not_in_gosbenchs_config_is_refused_at_check():
    """'numjob: 32' was left out of the config gosbench got: one parallel client, its default."""
    params = {"rw": "write", "bs": "4k", "runtime": "8s", "numjob": 32}
    assert config_test({**SPEC, "params": params})["parallel_clients"] == 1
    sections = [params, {**params, "ramp_time": "2s", "part_size": "5m", "iodepth": 4}]
    problems = ADAPTER.option_problems(sections)
    assert problems == {
        "numjob": "gosbench has no option 'numjob' (did you mean 'numjobs'?)",
        "iodepth": "gosbench has no option 'iodepth' (its options: bs, part_size, runtime,"
        " stop_with_ops, objects, buckets, object_prefix, workers_share_buckets, numjobs,"
        " clean_after, use_path_style, rw, rwmixread, read_weight, existing_read_weight,"
        " write_weight, delete_weight, list_weight)",
    }


@pytest.mark.parametrize(
    ("option", "value", "least"),
    [("objects", -1, 1), ("buckets", 0, 1), ("stop_with_ops", -5, 0), ("list_weight", -10, 0)],
)
def test_a_count_below_its_least_is_refused(option, value, least):
    """Written into the config before: objects number_min -1, buckets number_min 0."""
    params = {**SPEC["params"], option: value}
    with pytest.raises(
        BaseRenderError,
        match=rf"^gosbench: {option} must be a whole number >= {least}, not {value}$",
    ):
        config_test({**SPEC, "params": params})
