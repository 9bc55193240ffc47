"""Round two of bad input: names and paths, counts, limits, key files, adapter checks.

Each case is refused by `storbench check` naming its key (or warned about), before any job.
"""

from __future__ import annotations

import copy
import os
import time

import pytest
import yaml

from storbench import cli
from storbench.config import campaign as config
from storbench.config.sweep import MAX_RUNS
from storbench.core import secrets
from tests.config.test_bad_config import VALID, problems_of


def rename_experiment(new: str):
    def mutate(raw):
        raw["experiments"][new] = raw["experiments"].pop("demo")

    return mutate


def job(**options):
    return lambda raw: raw["experiments"]["demo"]["job"].update(options)


def sweep(**axes):
    return lambda raw: raw["experiments"]["demo"].update(sweep=axes)


# --- names and paths -----------------------------------------------------------------------


def test_a_trailing_newline_in_a_name_is_refused():
    """The schema's pattern ends in '$', which also matches before a final newline."""
    assert problems_of(rename_experiment("demo\n")) == [
        "experiments.'demo\\n': the name 'demo\\n' cannot name a file or folder: a letter or"
        " digit, then letters, digits, '_', '.' or '-' (at most 200)"
    ]


@pytest.mark.parametrize("name", ["a/b", "..x", ".hidden", "x y"], ids=repr)
def test_experiment_names_that_are_no_folder_name_are_refused(name):
    assert problems_of(rename_experiment(name)) == [
        f"experiments: bad name {name!r} (letters, digits, '_', '.', '-'; first a letter or digit)"
    ]


@pytest.mark.parametrize(
    "name", ["telemetry", "network", "logs", "targets", "services", "compare", "all", "cleanup"]
)
def test_names_of_storbench_folders_and_rules_are_reserved(name):
    assert (
        f"experiments.{name}: {name!r} is storbench's own"
        in problems_of(rename_experiment(name))[0]
    )


@pytest.mark.parametrize("host", ["all", "controller", "logs"])
def test_reserved_host_names_are_refused(host):
    def mutate(raw):
        raw["hosts"]["clients"] = {"transport": "ssh", "nodes": f"h1,{host}"}

    (problem,) = problems_of(mutate)
    assert problem.startswith(f"hosts.clients.nodes: host name {host!r} is storbench's own")


@pytest.mark.parametrize("value", ["..", ".", "-x", "_x"], ids=repr)
def test_a_swept_value_that_makes_an_unsafe_run_id_is_refused(value):
    def mutate(raw):  # elbencho: fio itself would refuse these rw values first
        raw["experiments"]["demo"].update(tool="elbencho", sweep={"rw": [value, "read"]})
        raw["experiments"]["demo"]["job"].pop("ioengine", None)  # fio's, not elbencho's

    (problem,) = problems_of(mutate)
    assert problem.startswith("experiments.demo.sweep: run id")
    assert "cannot name a folder" in problem and "change the swept value" in problem


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("filename_format", "../../outside/x", "must stay inside the target's directory"),
        ("filename_format", "$jobname/../../x", "must stay inside the target's directory"),
        ("filename", "/etc/passwd", "must stay inside the target's directory"),
        ("filename", "a:/etc/shadow", "must stay inside the target's directory"),
        ("filename", "..", "must stay inside the target's directory"),
        ("directory", "/etc", "storbench sets it from the target"),
        ("opendir", "/", "storbench sets it from the target"),
    ],
)
def test_fio_options_that_leave_the_target_are_refused(option, value, expected):
    (problem,) = problems_of(job(**{option: value}))
    assert problem.startswith(f"experiments.demo.job.{option}: {expected}")


def test_a_relative_file_name_inside_the_target_is_fine():
    raw = copy.deepcopy(VALID)
    raw["experiments"]["demo"]["job"].update(filename="shared.dat")
    assert config.load_campaign(raw).experiments["demo"].job["filename"] == "shared.dat"


# --- counts and limits ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "key", "value"),
    [
        (job(iodepth=0), "job.iodepth", "0"),
        (job(numjobs=0), "job.numjobs", "0"),
        (job(numjobs=-1), "job.numjobs", "-1"),
        (job(iodepth="0"), "job.iodepth", "'0'"),
        (job(iodepth=1.5), "job.iodepth", "1.5"),
        (sweep(iodepth=[0, 1]), "sweep.iodepth[0]", "0"),
        (sweep(numjobs=[4, -2]), "sweep.numjobs[1]", "-2"),
    ],
)
def test_counts_below_one_are_refused(mutate, key, value):
    option = key.rsplit(".", 1)[-1].split("[")[0]
    assert problems_of(mutate) == [
        f"experiments.demo.{key}: {option} must be a whole number >= 1, not {value}"
    ]


def test_a_million_point_sweep_is_refused_before_it_is_expanded():
    started = time.process_time()

    def mutate(raw):  # a thousand block sizes of 1-1000 KiB, in a file larger than each
        sweep(bs=[f"{i}k" for i in range(1, 1001)], iodepth=[*range(1, 1001)])(raw)
        raw["experiments"]["demo"]["job"]["size"] = "1g"

    (problem,) = problems_of(mutate)
    assert problem == (
        "experiments.demo.sweep: 1,000,000 sweep points, more than a campaign may plan"
        f" (MAX_RUNS = {MAX_RUNS:,}); split the sweep into several campaigns"
    )
    assert time.process_time() - started < 30  # a guard against expansion, not a benchmark


def test_the_limit_counts_every_experiment_of_the_campaign():
    def mutate(raw):
        raw["experiments"]["demo"].pop("sweep")  # one run
        for index in range(3):
            raw["experiments"][f"e{index}"] = {
                **raw["experiments"]["demo"],
                "sweep": {"bs": [f"{i}k" for i in range(1, 101)], "iodepth": [*range(1, 81)]},
            }

    assert problems_of(mutate) == [
        f"experiments: 24,001 runs, more than a campaign may plan (MAX_RUNS = {MAX_RUNS:,});"
        " split the experiments into several campaigns"
    ]


# --- key files -----------------------------------------------------------------------------


def ssh_group(identity) -> dict:
    return {"transport": "ssh", "nodes": "client01", "user": "root", "identity": str(identity)}


def test_an_identity_file_that_does_not_exist_is_refused(tmp_path):
    missing = tmp_path / "no-such-key"

    def mutate(raw):
        raw["hosts"]["clients"] = ssh_group(missing)
        raw["experiments"]["demo"]["hosts"] = "clients"

    assert problems_of(mutate) == [
        f"hosts.clients.identity: cannot read the key file {missing}: No such file or directory"
    ]


def test_a_missing_identity_file_keeps_its_groups_hosts_for_the_other_checks(tmp_path):
    """scale-test-loopback.yaml before `make lab`: the key is the one problem, not its hosts."""
    missing = tmp_path / "client_ed25519"

    def mutate(raw):
        raw["hosts"]["lab"] = {**ssh_group(missing), "nodes": "127.0.0.[2-5]"}
        raw["experiments"]["demo"]["hosts"] = "lab"
        raw["experiments"]["demo"]["steps"] = {"mode": "incremental", "size": 1}

    assert problems_of(mutate) == [
        f"hosts.lab.identity: cannot read the key file {missing}: No such file or directory"
    ]


def test_an_identity_file_others_can_read_is_warned_about(tmp_path, capsys):
    key = tmp_path / "id_ed25519"
    key.write_text("not really a key\n")
    key.chmod(0o644)
    raw = copy.deepcopy(VALID)
    raw["experiments"]["demo"]["job"]["ioengine"] = "io_uring"  # no queue-depth warning
    raw["hosts"]["clients"] = ssh_group(key)
    raw["experiments"]["demo"]["hosts"] = "clients"
    config.load_campaign(raw)
    assert f"storbench: warning: key file {key} can be read by other users (mode 644)" in (
        capsys.readouterr().err
    )
    key.chmod(0o600)
    config.load_campaign(raw)
    assert "warning" not in capsys.readouterr().err


def test_a_credentials_file_others_can_read_is_warned_about(tmp_path, capsys):
    path = tmp_path / "credentials"
    path.write_text("[default]\naws_access_key_id = AK\naws_secret_access_key = SK\n")
    os.chmod(path, 0o640)
    target = {"credentials": {"file": str(path)}}
    credentials = secrets.target_credentials("s3", target)
    assert credentials.access_key == "AK"
    err = capsys.readouterr().err
    assert (
        f"storbench: warning: credentials file {path} can be read by other users (mode 640)" in err
    )
    assert "SK" not in err


# --- what only the adapter can say -----------------------------------------------------------


def test_check_asks_the_adapter_about_every_run(tmp_path, capsys):
    raw = {
        "hosts": {"localhost": {"transport": "local"}},
        "targets": {
            "s3": {
                "type": "s3",
                "endpoint": "http://127.0.0.1:9000",
                "bucket_prefix": "bench",
                "credentials": {"access_key_env": "A", "secret_key_env": "B"},
            }
        },
        "experiments": {
            "w": {
                "tool": "warp",
                "hosts": "localhost",
                "target": "s3",
                "job": {"bs": "4k", "runtime": "5s"},
                "sweep": {"op": ["put", "nonsense", "alsonot"]},
            }
        },
    }
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(raw))
    config.load_campaign_file(path)  # the config itself is valid ...
    code = cli.main(["check", "--config", str(path)])
    err = capsys.readouterr().err
    assert code == 1  # ... but warp cannot run two of its runs
    assert (
        f"invalid {path}:\n  - experiments.w.sweep.op: run bs4k_op-nonsense (and 1 more runs):"
        " warp: op 'nonsense' is not one of get, put, mixed, delete, list, stat (line 8)\n"
    ) in err


def _vdbench_raw_numjobs(tmp_path, numjobs: str):
    raw = {
        "hosts": {"localhost": {"transport": "local"}},
        "targets": {"lun": {"type": "block", "path": "/dev/mapper/afa_lun1"}},
        "experiments": {
            "v": {
                "tool": "vdbench",
                "hosts": "localhost",
                "target": "lun",
                "job": {"rw": "randread", "bs": "4k", "runtime": "60s", "numjobs": numjobs},
            }
        },
    }
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_a_host_fact_value_the_adapter_refuses_on_any_host_is_refused_by_check(tmp_path, capsys):
    """Host facts are computed per host at render time; check computes them for a 4-core and
    a 128-core client: vdbench raw workloads refuse a numjobs other than 1 on both."""
    path = _vdbench_raw_numjobs(tmp_path, "{cores // 2}")
    assert cli.main(["check", "--config", str(path)]) == 1
    assert (
        "  - experiments.v.job.numjobs: run randread_bs4k_njhost: vdbench raw workloads have no"
        " numjobs; use iodepth (threads per SD) (with the host facts of clients of 4 cores, 16"
        " GiB and 128 cores, 1024 GiB) (line 6)\n"
    ) in capsys.readouterr().err


def test_a_host_fact_value_one_sample_host_accepts_passes_check(tmp_path, capsys):
    """{cores // 100}: 0 on 4 cores (refused), 1 on 128: a host may take it, so check does."""
    path = _vdbench_raw_numjobs(tmp_path, "{cores // 100}")
    assert cli.main(["check", "--config", str(path)]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.startswith("v: vdbench on 1 host(s) [localhost]")


# --- job options that run commands ---------------------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "key", "command"),
    [
        (job(exec_prerun="touch /tmp/x"), "job.exec_prerun", "'touch /tmp/x'"),
        (job(exec_postrun="rm -rf ~"), "job.exec_postrun", "'rm -rf ~'"),
        (job(ioengine="exec", program="/bin/sh"), "job.ioengine", "'exec: /bin/sh'"),
        (sweep(exec_postrun=["true", "false"]), "sweep.exec_postrun", "'true'"),
    ],
)
def test_options_that_run_commands_need_allow_commands(mutate, key, command):
    assert problems_of(mutate) == [
        f"experiments.demo.{key}: runs a command on every host ({command}); set"
        " allow_commands: true on the experiment to run it"
    ]


def test_allow_commands_lets_them_run_and_plan_lists_them(tmp_path, capsys):
    raw = copy.deepcopy(VALID)
    raw["experiments"]["demo"]["job"].update(exec_prerun="touch prerun-ran")
    raw["experiments"]["demo"]["allow_commands"] = True
    assert config.load_campaign(raw).experiments["demo"].allow_commands
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert cli.main(["plan", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert (
        "   COMMANDS FROM JOB OPTIONS (allow_commands: true), on every host:\n"
        "     exec_prerun: touch prerun-ran  [every run]\n"
    ) in out


def test_datasets_and_recipes_never_run_job_commands():
    def mutate(raw):
        raw["datasets"] = {
            "d": {"target": "scratch", "job": {"size": "1m", "exec_prerun": "touch x"}}
        }
        raw["experiments"]["demo"]["dataset"] = "d"
        del raw["experiments"]["demo"]["job"]["size"]  # the dataset's size is the job's

    assert problems_of(mutate) == [
        "datasets.d.job.exec_prerun: runs a command on every host ('touch x'); not in datasets"
        " or preconditioning (use purge: or flush: commands)"
    ]
