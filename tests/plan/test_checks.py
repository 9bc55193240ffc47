"""`storbench check` names the key and line of the job option a tool's adapter refuses."""

import pytest

from storbench import cli

HOSTS_AND_TARGETS = """\
hosts:
  localhost: {transport: local}
targets:
  scratch: {type: directory, path: /var/tmp/storbench/checks}
  lun: {type: block, path: /dev/mapper/afa_lun1}
  s3:
    type: s3
    endpoint: http://127.0.0.1:9000
    bucket_prefix: bench
    credentials: {access_key_env: A, secret_key_env: B}
experiments:
"""

ELBENCHO_PHASES = """\
  files:
    tool: elbencho
    hosts: localhost
    target: scratch
    job:
      size: 64k
      phases: mkdir,write
    sweep: {numjobs: [1, 4]}
"""

GOSBENCH_SWEPT_RW = """\
  objects:
    tool: gosbench
    hosts: localhost
    target: s3
    job: {bs: 4k, runtime: 30s}
    sweep:
      numjobs: [4]
      rw:
        - read
        - writ
"""

VDBENCH_ZIPPED_RW = """\
  afa:
    tool: vdbench
    hosts: localhost
    target: lun
    job: {bs: 8k, runtime: 60s}
    sweep:
      zip:
        rw: [rw, rww]
        rwmixread: [20, 80]
"""

IPERF3_STREAMS = """\
  net:
    tool: iperf3
    hosts: localhost
    target: scratch
    job:
      server: 127.0.0.1
      streams: 0
"""

ELBENCHO_NO_WORKLOAD = """\
  no_workload:
    tool: elbencho
    hosts: localhost
    target: scratch
    job: {size: 64k}
"""


@pytest.mark.parametrize(
    ("experiment", "expected"),
    [
        (
            ELBENCHO_PHASES,
            "experiments.files.job.phases: run nj1 (and 1 more runs): elbencho experiment"
            " files: phases 'mkdir,write' ('mkdir': did you mean 'mkdirs'?): known are mkdirs,"
            " write, stat, read, rmfiles, rmdirs (line 18)",
        ),
        (
            GOSBENCH_SWEPT_RW,
            "experiments.objects.sweep.rw: run writ_bs4k_nj4: gosbench: rw 'writ' (did you mean"
            " 'write'?): gosbench does read, randread, write, randwrite, rw, readwrite, randrw"
            " (line 19)",
        ),
        (
            VDBENCH_ZIPPED_RW,
            "experiments.afa.sweep.zip.rw: run rww_bs8k_mix80: vdbench: unsupported rw 'rww'"
            " (read, write, rw, rand...) (line 19)",
        ),
        (
            IPERF3_STREAMS,
            "experiments.net.job.streams: run run: iperf3 option streams must be a positive"
            " whole number, got 0 (line 18)",
        ),
        # a refusal of no one option (an option missing) names the experiment
        (
            ELBENCHO_NO_WORKLOAD,
            "experiments.no_workload: run run: elbencho experiment no_workload: set rw (read,"
            " randread, write, randwrite, rw, randrw) or phases (line 12)",
        ),
    ],
    ids=["elbencho-job", "gosbench-sweep", "vdbench-zip", "iperf3-job", "no-option"],
)
def test_check_names_the_line_of_the_option_the_adapter_refuses(
    tmp_path, capsys, monkeypatch, experiment, expected
):
    monkeypatch.setenv("A", "access")
    monkeypatch.setenv("B", "secret")
    path = tmp_path / "campaign.yaml"
    path.write_text(HOSTS_AND_TARGETS + experiment)
    assert cli.main(["check", "--config", str(path)]) == 1
    assert f"  - {expected}\n" in capsys.readouterr().err


def test_check_strict_fails_on_a_warning_and_passes_without(tmp_path, capsys, monkeypatch):
    """--strict, for a CI that reviews configs: a warning is a failure too."""
    monkeypatch.setenv("A", "access")  # the s3 target's credentials: set, not warned about
    monkeypatch.setenv("B", "secret")
    experiment = """\
  qd:
    tool: fio
    hosts: localhost
    target: scratch
    job: {rw: randread, runtime: 2m}
    sweep: {iodepth: [1, 32]}
"""
    path = tmp_path / "campaign.yaml"
    path.write_text(HOSTS_AND_TARGETS + experiment)
    assert cli.main(["check", "--config", str(path)]) == 0
    assert cli.main(["check", "--config", str(path), "--strict"]) == 1
    err = capsys.readouterr().err
    assert (
        err.count("storbench: warning: experiments.qd.sweep.iodepth: 32 with ioengine psync") == 2
    )
    assert err.endswith("storbench: error: --strict: 1 warning(s) above\n")
    path.write_text(
        HOSTS_AND_TARGETS + experiment.replace("runtime: 2m", "runtime: 2m, ioengine: io_uring")
    )
    assert cli.main(["check", "--config", str(path), "--strict"]) == 0
