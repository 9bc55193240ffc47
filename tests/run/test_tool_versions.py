"""Hosts whose tool versions differ: preflight warns (or fails, with require_same_version),
and the experiment report says which version ran where.

The other version is an SSH host whose PATH starts with a wrapper `fio`: it says
fio-3.28 to `--version`, and its JSON says so too, as another fio build's would; the I/O is
the real fio's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from storbench.hosts.transport import disconnect
from storbench.run.preflight import PreflightError, run_preflight
from tests.sshd import SshLab, lab_host
from tests.workflow.test_workflow import snakemake

OTHER_VERSION = "fio-3.28"
ADDRESS = "127.0.0.51"
LOCAL = {"name": "localhost", "transport": "local"}


def installed_fio_version() -> str:
    return subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip()


def wrapper_fio(bin_dir: Path) -> None:
    """`fio` saying OTHER_VERSION, in its --version and in the JSON it writes (--output=)."""
    bin_dir.mkdir()
    program = bin_dir / "fio"
    program.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = --version ]; then echo {OTHER_VERSION}; exit 0; fi\n'
        f'{shutil.which("fio")} "$@"; rc=$?\n'
        'for arg; do case "$arg" in --output=*) sed -i '
        f'\'s/"fio version" : "fio-[^"]*"/"fio version" : "{OTHER_VERSION}"/\' '
        '"${arg#--output=}";; esac; done\n'
        'exit "$rc"\n'
    )
    program.chmod(0o755)


@pytest.fixture
def older_fio_host(tmp_path):
    """(lab, server) of an sshd whose sessions find the wrapper fio first on their PATH."""
    wrapper_fio(tmp_path / "old-fio-bin")
    yield from host_with_path_first(tmp_path, tmp_path / "old-fio-bin")


def host_with_path_first(tmp_path: Path, bin_dir: Path):
    """(lab, server) of an sshd whose sessions find bin_dir's programs first on their PATH."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text(f'export PATH={bin_dir}:"$PATH"\n')
    (tmp_path / "sshd").mkdir()
    lab = SshLab(tmp_path / "sshd", session_home=home)
    try:
        server = lab.start(ADDRESS)
        yield lab, server
    finally:
        lab.stop_all()


def preflight_spec(hosts: list[dict], target: Path, **extra) -> dict:
    return {
        "experiment": "exp",
        "tool": "fio",
        "target": {"name": "scratch", "type": "directory", "path": str(target)},
        "hosts": hosts,
        **extra,
    }


def test_preflight_warns_naming_each_version_and_its_hosts(older_fio_host, tmp_path):
    lab, server = older_fio_host
    host = lab_host(lab, server, tmp_path / "work")
    try:
        report = run_preflight(
            preflight_spec([LOCAL, host.to_dict()], tmp_path / "t"), str(tmp_path / "p.json")
        )
        with pytest.raises(PreflightError) as failed:
            strict = preflight_spec(
                [LOCAL, host.to_dict()], tmp_path / "t", require_same_version=True
            )
            run_preflight(strict, str(tmp_path / "strict.json"))
    finally:
        disconnect([host])
    installed = installed_fio_version()
    warning = (
        f"fio versions differ across hosts: {OTHER_VERSION} on {ADDRESS}; {installed} on localhost"
    )
    assert report["warnings"] == [warning]
    assert report["versions"] == {installed: ["localhost"], OTHER_VERSION: [ADDRESS]}
    assert json.loads((tmp_path / "p.json").read_text())["warnings"] == [warning]
    assert str(failed.value) == f"exp: preflight failed: {warning} (require_same_version: true)"
    assert not (tmp_path / "strict.json").exists()


def test_hosts_of_one_version_give_no_warning(tmp_path):
    report = run_preflight(preflight_spec([LOCAL], tmp_path / "t"), str(tmp_path / "p.json"))
    assert report["warnings"] == []
    assert report["versions"] == {installed_fio_version(): ["localhost"]}


def gosbench_binaries(bin_dir: Path, worker: bytes) -> Path:
    """Files standing in as gosbench's two binaries: one server build, the worker given."""
    bin_dir.mkdir()
    for name, content in (
        ("gosbench-server", b"gosbench-server build A\n"),
        ("gosbench-worker", worker),
    ):
        (bin_dir / name).write_bytes(content)
        (bin_dir / name).chmod(0o755)
    return bin_dir


@pytest.fixture
def other_gosbench_host(tmp_path):
    """(lab, server) of an sshd whose gosbench-worker is another build than localhost's."""
    bin_dir = gosbench_binaries(tmp_path / "other-gosbench-bin", b"gosbench-worker build B\n")
    yield from host_with_path_first(tmp_path, bin_dir)


def test_preflight_tells_gosbench_builds_apart_by_their_binaries(
    other_gosbench_host, tmp_path, monkeypatch
):
    # gosbench prints no version: its binaries' sha256 (of the bytes written above) is one
    local_bin = gosbench_binaries(tmp_path / "gosbench-bin", b"gosbench-worker build A\n")
    monkeypatch.setenv("PATH", f"{local_bin}:{os.environ['PATH']}")
    lab, server = other_gosbench_host
    host = lab_host(lab, server, tmp_path / "work")
    target = {"name": "s3", "type": "s3", "endpoint": "http://127.0.0.1:9000", "bucket": "b"}
    spec = {"experiment": "exp", "tool": "gosbench", "target": target}
    try:
        report = run_preflight({**spec, "hosts": [LOCAL, host.to_dict()]}, str(tmp_path / "p.json"))
        alone = run_preflight({**spec, "hosts": [LOCAL]}, str(tmp_path / "alone.json"))
        with pytest.raises(PreflightError) as failed:
            strict = {**spec, "hosts": [LOCAL, host.to_dict()], "require_same_version": True}
            run_preflight(strict, str(tmp_path / "strict.json"))
    finally:
        disconnect([host])
    local = "gosbench server sha256:28bb79294424 worker sha256:18086daa2cb0"
    other = "gosbench server sha256:28bb79294424 worker sha256:a74a002bed96"
    warning = f"gosbench versions differ across hosts: {local} on localhost; {other} on {ADDRESS}"
    assert report["versions"] == {local: ["localhost"], other: [ADDRESS]}
    assert [host["tool_version"] for host in report["hosts"]] == [local, other]
    assert report["warnings"] == [warning]
    assert (alone["versions"], alone["warnings"]) == ({local: ["localhost"]}, [])
    assert str(failed.value) == f"exp: preflight failed: {warning} (require_same_version: true)"


def storbench(workdir: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "storbench", *args], cwd=workdir, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def mixed_config(lab: SshLab, tmp_path: Path) -> dict:
    (older,) = lab.host_groups(1, lambda _: tmp_path / "remote-workdir").values()
    return {
        "hosts": {"localhost": {"transport": "local"}, "older": older},
        "targets": {"scratch": {"type": "directory", "path": str(tmp_path / "target")}},
        "experiments": {
            "mixed": {
                "tool": "fio",
                "hosts": ["localhost", "older"],
                "target": "scratch",
                "iterations": 1,
                "job": {"size": "4MiB", "runtime": "1s", "ioengine": "psync", "rw": "randread"},
                "sweep": {"bs": ["4k"]},
            }
        },
    }


def test_the_experiment_report_flags_the_versions_its_rows_record(older_fio_host, tmp_path):
    lab, _ = older_fio_host
    config = mixed_config(lab, tmp_path)
    log = tmp_path / "results/mixed/logs/preflight.log"
    console = snakemake(tmp_path, config, "reports/mixed/index.html").stderr
    warned = log.read_text()
    config["experiments"]["mixed"]["require_same_version"] = True
    strict = snakemake(tmp_path, config, "results/mixed/preflight.json", check=False)
    installed = installed_fio_version()
    warning = (
        f"fio versions differ across hosts: {OTHER_VERSION} on {ADDRESS}; {installed} on localhost"
    )
    assert warned.splitlines()[-1] == f"warning: {warning}"
    assert f"\nstorbench: warning: mixed: {warning}\n" in console  # the logger plugin's line
    rows = pq.read_table(tmp_path / "results/mixed/summary.parquet").to_pylist()
    assert {(row["host"], row["tool_version"]) for row in rows if row["host"] != "all"} == {
        ("localhost", installed),
        (ADDRESS, OTHER_VERSION),
    }
    html = (tmp_path / "reports/mixed/index.html").read_text()
    assert f'<p class="warning">{warning}. Results measured with different versions' in html
    # the run folder imported again, and compared with localhost's own output imported alone
    run_folder = tmp_path / "results/mixed/raw/randread_bs4k/it1"
    imported = storbench(tmp_path, "import", "-o", "again.parquet", str(run_folder))
    assert f"warning: {warning}" in imported.splitlines()
    local_only = tmp_path / "local-only/localhost/randread_bs4k.json"
    local_only.parent.mkdir(parents=True)
    shutil.copy(next(run_folder.glob("a*/localhost.json")), local_only)
    storbench(tmp_path, "import", "-o", "local.parquet", str(local_only))
    compared = storbench(
        tmp_path, "compare", "report", "results/mixed", "local.parquet", "--out-dir", "cmp",
        "--a-label", "mixed", "--b-label", "local",
    )  # fmt: skip
    both = " and ".join(sorted([OTHER_VERSION, installed]))
    assert compared.splitlines()[1:] == [
        f"warning: mixed: {warning}",
        f"warning: fio versions differ between the sides: {both} in mixed; {installed} in local",
    ]
    verdict = json.loads((tmp_path / "cmp/regressions.json").read_text())
    assert verdict["warnings"] == [
        line.removeprefix("warning: ") for line in compared.splitlines()[1:]
    ]
    assert (
        f"fio versions differ between the sides: {both} in mixed"
        in (tmp_path / "cmp/index.html").read_text()
    )
    assert strict.returncode != 0
    assert log.read_text().splitlines()[-1] == (
        f"storbench: error: mixed: preflight failed: {warning} (require_same_version: true)"
    )
