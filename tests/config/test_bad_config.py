"""Bad configs: refused before any job with the key path named, or carried through verbatim.

The corpus in tests/bad_inputs/ holds whole bad files (each says what the error must contain);
the tables below mutate one valid config per case. Values that reach job files and command
lines carry shell syntax aimed at canary files; real fio runs them (local and SSH transport,
the CLI steps and Snakemake itself) and the canaries must not exist afterwards.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from storbench import cli
from storbench.config import campaign as config
from storbench.config import host_groups
from storbench.config import source as config_source
from storbench.config.source import load_yaml
from storbench.plan import specs as plan
from tests.workflow.test_workflow import REPO, SNAKEMAKE

CORPUS = sorted((Path(__file__).parents[1] / "bad_inputs").glob("*.yaml"))
# corpus files also fed to Snakemake (each run costs a Snakemake start-up)
SNAKEMAKE_CASES = (
    "tab-indentation.yaml",
    "alias-bomb.yaml",
    "host-group-upcall.yaml",
    "reserved-names.yaml",
    "escaping-paths.yaml",
    "dotdot-run-id.yaml",
    "command-options.yaml",
    "zero-counts.yaml",
    "preparation-option-typos.yaml",
)
WRITTEN_BYTES = 256 * 1024  # the job below writes its size once: 64 I/Os of 4 KiB
VALID = {
    "hosts": {
        "localhost": {"transport": "local"},
        "clients": {"nodes": "client[01-04]", "transport": "ssh", "user": "root"},
    },
    "targets": {"scratch": {"type": "directory", "path": "/var/tmp/storbench/scratch"}},
    "experiments": {
        "demo": {
            "tool": "fio",
            "hosts": "localhost",
            "target": "scratch",
            "job": {"size": "256KiB", "ioengine": "psync", "rw": "write", "bs": "4k"},
            "sweep": {"iodepth": [1, 4]},
        }
    },
}


def expectations(path: Path, label: str) -> list[str]:
    prefix = f"# {label}: "
    lines = path.read_text().splitlines()
    return [line.removeprefix(prefix) for line in lines if line.startswith(prefix)]


def check(path: Path, capsys) -> tuple[int, str]:
    code = cli.main(["check", "--config", str(path)])
    return code, capsys.readouterr().err


def problems_of(mutate) -> list[str]:
    raw = copy.deepcopy(VALID)
    mutate(raw)
    with pytest.raises(config.ConfigError) as caught:
        config.load_campaign(raw)
    return caught.value.problems


# --- the corpus: whole files ---------------------------------------------------------------


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_corpus_file_is_refused_naming_file_and_key(path, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # where a relative 'touch canary' would land
    code, err = check(path, capsys)
    assert code == 1 and "Traceback" not in err
    assert f"invalid {path}:" in err
    assert expectations(path, "expect"), f"{path.name} says nothing about its error"
    for expected in expectations(path, "expect"):
        assert expected in err, err
    for canary in expectations(path, "canary"):
        assert not (tmp_path / canary).exists(), f"{canary} was created: something ran"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "the file is empty"),
        (b"\n   \n", "the file is empty"),
        (b"hosts: {caf\xe9: {transport: local}}\n", "not UTF-8 text"),
        (b"\xef\xbb\xbfhosts: [\n", "not valid YAML"),  # a BOM, then YAML that is cut short
        (b"!!python/object/apply:os.system ['touch pwned']\n", "not valid YAML"),
        (b"# ok\nhosts:\n  x: {a: caf\xe9}\n", "line 3: not UTF-8 text (byte 0xe9)"),
        (b"hosts: " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deeply"),
        (b"hosts:\n" + b"".join(b"  " * i + b"k:\n" for i in range(1, 3000)), "nested too deeply"),
    ],
    ids=[
        "empty",
        "blank",
        "latin-1",
        "bom-truncated",
        "python-tag",
        "latin-1-line",
        "deep-flow",
        "deep-block",
    ],
)
def test_unreadable_file_is_refused_naming_it(content, expected, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "campaign.yaml"
    path.write_bytes(content)
    code, err = check(path, capsys)
    assert code == 1 and f"invalid {path}:" in err and expected in err, err
    assert not (tmp_path / "pwned").exists()


def test_zero_padded_numbers_are_refused_naming_what_yaml_reads(tmp_path, capsys):
    """YAML 1.1 reads 016 as octal 14 and 008 as text: a padded sweep ran qd14 and 'qd008'."""
    path = tmp_path / "campaign.yaml"
    raw = copy.deepcopy(VALID)
    text = yaml.safe_dump(raw) + "x_quoted: '016'\nx_padded: [001, 008, 016, 10, 0, 0.5]\n"
    path.write_text(text)
    line = text.splitlines().index("x_padded: [001, 008, 016, 10, 0, 0.5]") + 1
    code, err = check(path, capsys)
    assert code == 1
    assert err.splitlines()[1:] == [
        f"  - line {line}: 001 has a leading zero, which YAML reads as octal, 1; write 1 (or"
        " quote it, as text)",
        f"  - line {line}: 008 has a leading zero, which YAML reads as the text '008'; write 8"
        " (or quote it, as text)",
        f"  - line {line}: 016 has a leading zero, which YAML reads as octal, 14; write 16 (or"
        " quote it, as text)",
    ]


def test_missing_file_and_folder_are_named(tmp_path, capsys):
    assert check(tmp_path / "nope.yaml", capsys) == (
        1,
        f"storbench: error: invalid {tmp_path / 'nope.yaml'}:\n"
        "  - cannot read: No such file or directory\n",
    )
    code, err = check(tmp_path, capsys)
    assert code == 1 and f"invalid {tmp_path}:" in err and "Is a directory" in err


def test_merge_keys_may_override_without_being_duplicates(tmp_path):
    path = tmp_path / "campaign.yaml"
    path.write_text(
        "hosts: {localhost: {transport: local}}\n"
        "targets: {scratch: {type: directory, path: /var/tmp/x}}\n"
        "x-job: &job {bs: 4k, rw: read}\n"
        "experiments:\n"
        "  demo: {tool: fio, hosts: localhost, target: scratch, job: {<<: *job, bs: 1m}}\n"
    )
    with pytest.raises(config.ConfigError, match="x-job: unknown key"):
        config.load_campaign_file(path)  # the anchor's own key is not in the schema ...
    raw = load_yaml(path)  # ... but the override of a merged key is no duplicate
    assert raw["experiments"]["demo"]["job"] == {"bs": "1m", "rw": "read"}


def test_check_exits_1_as_a_process(tmp_path):
    path = CORPUS[0]
    result = subprocess.run(
        [sys.executable, "-m", "storbench", "check", "--config", str(path)],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(f"storbench: error: invalid {path}:")


def snakemake_with(configfile: Path, workdir: Path) -> subprocess.CompletedProcess:
    command = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--configfile", str(configfile)]
    return subprocess.run(
        [*command, "--cores", "1"], cwd=workdir, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("name", SNAKEMAKE_CASES)
def test_snakemake_stops_before_any_job(name, tmp_path):
    path = Path(__file__).parents[1] / "bad_inputs" / name
    result = snakemake_with(path, tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert all(expected in output for expected in expectations(path, "expect")), output
    if name == "tab-indentation.yaml":  # Snakemake's message, then the file and line it lacks
        assert "Config file is not valid JSON or YAML" in output
        assert f"storbench: invalid {path}:\n  - line 7, column 1: not valid YAML" in output
    assert not (tmp_path / "results").exists() and not (tmp_path / "reports").exists()
    assert all(not (tmp_path / canary).exists() for canary in expectations(path, "canary"))


def test_snakemake_names_the_one_configfile_it_cannot_read(tmp_path):
    """Of two --configfiles, the unreadable one is named with its line; a target named after
    them (which the option's nargs takes too) is not taken for a file."""
    good = tmp_path / "lab.yaml"
    good.write_text(yaml.safe_dump(VALID))
    bad = tmp_path / "override.yaml"
    bad.write_text("experiments:\n  demo: {job: {bs: 4k}\n  other: 1\n")
    command = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-n", "--configfile", str(good)]
    result = subprocess.run(
        [*command, str(bad), "all"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert (
        f"storbench: invalid {bad}:\n  - line 3, column 3: not valid YAML: expected ',' or '}}',"
        " but got '<scalar>' (while parsing a flow mapping at line 2, column 9)"
    ) in output
    assert f"invalid {good}" not in output and "invalid all" not in output


def test_configfile_arguments_as_snakemake_reads_them():
    argv = ["-n", "--configfile=a.yaml", "--cores", "2", "--configfiles", "b.yaml", "c.yaml"]
    assert config_source.configfile_arguments(argv) == ["a.yaml", "b.yaml", "c.yaml"]
    assert config_source.configfile_arguments(["all", "-n"]) == []


def test_snakemake_evaluates_yte_first_then_storbench_stops(tmp_path):
    """What storbench cannot prevent (Snakemake ran the expression), and what it does."""
    path = Path(__file__).parents[1] / "bad_inputs" / "yte-expressions.yaml"
    result = snakemake_with(path, tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "__use_yte__: this file asks Snakemake to evaluate it as a YTE template" in output
    assert "vet a config from someone else with `storbench check` first" in output
    assert (tmp_path / "yte-ran").exists()  # Snakemake's YTE loader ran it, before storbench
    assert not (tmp_path / "results").exists() and not (tmp_path / "reports").exists()


def test_snakemake_refuses_duplicate_keys(tmp_path):
    path = Path(__file__).parents[1] / "bad_inputs" / "duplicate-experiment.yaml"
    result = snakemake_with(path, tmp_path)
    assert result.returncode != 0 and "found duplicate key 'demo'" in result.stdout + result.stderr


def test_snakemake_names_the_file_and_line_of_a_problem_in_its_second_configfile(tmp_path):
    """Snakemake merges --configfile files; each problem names the one its key came from."""
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump(VALID, sort_keys=False))
    override = tmp_path / "override.yaml"
    override.write_text("# the lab's own settings\nexperiments:\n  demo:\n    iterations: 0\n")
    command = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--configfile", str(base), str(override)]
    result = subprocess.run(
        [*command, "-n"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert result.returncode != 0
    assert (
        f"  - experiments.demo.iterations: 0 is less than the minimum of 1 ({override} line 4)"
        in result.stdout + result.stderr
    )
    assert not (tmp_path / "results").exists()


def test_a_problem_names_its_own_line_in_a_flow_sequence_and_a_merged_key_its_mappings(
    tmp_path, capsys
):
    path = tmp_path / "campaign.yaml"
    path.write_text(
        "hosts: {localhost: {transport: local}}\n"
        "targets: {scratch: {type: directory, path: /var/tmp/x}}\n"
        "experiments:\n"
        "  first:\n"
        "    tool: fio\n"
        "    hosts: localhost\n"
        "    target: scratch\n"
        "    job: &job {size: 1m, bs: 0k, rw: read}\n"
        "    sweep:\n"
        "      iodepth: [1, 0, 4]\n"
        "      numjobs:\n"
        "        - 1\n"
        "        - -2\n"
        "  second:\n"
        "    tool: fio\n"
        "    hosts: localhost\n"
        "    target: scratch\n"
        "    job: {<<: *job, rw: write}\n"
    )
    code, err = check(path, capsys)
    assert code == 1
    assert err.splitlines()[1:] == [
        "  - experiments.first.job.bs: a block size must be more than 0: '0k' (line 8)",
        "  - experiments.first.sweep.iodepth[1]: iodepth must be a whole number >= 1, not 0"
        " (line 10)",
        "  - experiments.first.sweep.numjobs[1]: numjobs must be a whole number >= 1, not -2"
        " (line 13)",
        # merged from first's job: the line of second's job, the nearest key the file has
        "  - experiments.second.job.bs: a block size must be more than 0: '0k' (line 18)",
    ]


def test_a_refused_host_group_is_named_once(tmp_path):
    """Before: its experiment's steps and its network mesh were refused too, for the 0 hosts
    left of it ('steps.size: 1 is more than the 0 host(s)', 'a mesh needs at least 2 hosts')."""
    absent = tmp_path / "client_ed25519"

    def refused_group(raw):
        raw["hosts"]["clients"]["identity"] = str(absent)
        raw["network"] = {"mesh": ["clients"]}
        experiment(raw).update(hosts="clients", steps={"mode": "incremental", "size": 1})

    assert problems_of(refused_group) == [
        f"hosts.clients.identity: cannot read the key file {absent}: No such file or directory"
    ]


ELASTIFILE = REPO / "config/examples/elastifile.yaml"


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("numjobs", "x", "numjobs must be a whole number >= 1, not 'x'"),
        ("numjobs", 0, "numjobs must be a whole number >= 1, not 0"),
        ("filesize", "lots", "not a size: 'lots' (expected e.g. 4k, 1m, 256MiB, 1g)"),
    ],
)
def test_a_bad_dataset_option_is_named_once_at_the_dataset(option, value, expected):
    """Before: a count that was no number stopped `check` with a traceback, and the two
    experiments using the dataset were told it was unknown, or repeated its problem."""
    raw = load_yaml(ELASTIFILE)
    raw["datasets"]["working_set"]["job"][option] = value
    with pytest.raises(config.ConfigError) as caught:
        config.load_campaign(raw)
    assert caught.value.problems == [f"datasets.working_set.job.{option}: {expected}"]


@pytest.mark.parametrize("value", ["", ",", " "])
def test_an_empty_block_size_in_a_zipped_sweep_is_named(value):
    raw = copy.deepcopy(VALID)
    raw["experiments"]["demo"]["sweep"] = {"zip": {"bs": [value, "4k"], "iodepth": [1, 4]}}
    with pytest.raises(config.ConfigError) as caught:
        config.load_campaign(raw)
    assert caught.value.problems == [
        f"experiments.demo.sweep.zip.bs[0]: not a block size or range: {value!r}"
    ]


# --- one schema violation of each class ------------------------------------------------------


def experiment(raw) -> dict:
    return raw["experiments"]["demo"]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        # wrong type
        (lambda c: c.update(hosts=["localhost"]), "hosts: ['localhost'] is not of type 'object'"),
        (
            lambda c: c["targets"]["scratch"].update(per_host_subdir="yes"),
            "targets.scratch.per_host_subdir: 'yes' is not of type 'boolean'",
        ),
        (lambda c: c["hosts"]["clients"].update(port="22"), "hosts.clients.port: '22' is not of"),
        (
            lambda c: experiment(c)["sweep"].update(bs="4k"),
            "experiments.demo.sweep.bs: a sweep lists its values ([4k]), not '4k'; one value",
        ),
        (lambda c: experiment(c)["job"].update(bs=[4, 8]), "experiments.demo.job.bs: [4, 8] is"),
        (lambda c: experiment(c).update(iterations=True), "experiments.demo.iterations: True is"),
        # unknown key
        (lambda c: c["hosts"]["clients"].update(password="x"), "hosts.clients.password: unknown"),
        (lambda c: c["targets"]["scratch"].update(size="1g"), "targets.scratch.size: unknown key"),
        # missing required key
        (lambda c: c.pop("targets"), "(top level): 'targets' is a required property"),
        (lambda c: experiment(c).pop("tool"), "experiments.demo: 'tool' is a required property"),
        (lambda c: c["hosts"]["clients"].pop("transport"), "hosts.clients: 'transport' is a"),
        # enum
        (lambda c: experiment(c).update(execution="parallel"), "experiments.demo.execution:"),
        (lambda c: experiment(c).update(steps={"mode": "x"}), "experiments.demo.steps.mode: 'x'"),
        (lambda c: c["targets"]["scratch"].update(type="nfs"), "targets.scratch.type: must be"),
        # out of range
        (lambda c: experiment(c).update(iterations=0), "experiments.demo.iterations: 0 is less"),
        (lambda c: experiment(c).update(iterations=1001), "iterations: 1001 is greater than"),
        (lambda c: experiment(c).update(rwmixreadhost=101), "rwmixreadhost: 101 is greater"),
        (lambda c: experiment(c).update(slow_host_percent=0), "slow_host_percent: 0 is less"),
        (lambda c: c["hosts"]["clients"].update(port=0), "hosts.clients.port: 0 is less than"),
        # names
        (lambda c: experiment(c)["job"].update({"Bad-Name": 1}), "experiments.demo.job: bad name"),
        (lambda c: c["targets"].update({"a/b": {}}), "targets: bad name 'a/b' (letters, digits"),
        (lambda c: c["hosts"].update({"-rf": {"transport": "local"}}), "hosts: bad name '-rf'"),
        # lengths: names and run ids become file names (at most 255 bytes)
        (
            lambda c: c["experiments"].update({"e" * 101: experiment(c)}),
            f"experiments: bad name {'e' * 40!r}... (101 characters; at most 100)",
        ),
        (
            lambda c: experiment(c)["sweep"].update(description=["d" * 190]),
            "experiments.demo.sweep: run id write_bs4k_qd1_description-ddd",
        ),
        (lambda c: c["hosts"]["clients"].update(nodes="h" * 201), "hosts.clients.nodes: bad host"),
    ],
)
def test_each_schema_class_names_its_key(mutate, expected):
    problems = problems_of(mutate)
    assert any(expected in problem for problem in problems), problems


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        # other tools' names for a key (clush's node list, ssh_config's options)
        (
            lambda c: c["hosts"]["clients"].update(hosts=c["hosts"]["clients"].pop("nodes")),
            "hosts.clients.hosts: unknown key (did you mean 'nodes'?)",
        ),
        (
            lambda c: c["hosts"]["clients"].update(username="root"),
            "hosts.clients.username: unknown key (did you mean 'user'?)",
        ),
        (
            lambda c: c["hosts"]["clients"].update(ProxyJump="bastion"),
            "hosts.clients.ProxyJump: unknown key (did you mean 'jump'?)",
        ),
        # a misspelt key
        (
            lambda c: experiment(c).update(iteration=3),
            "experiments.demo.iteration: unknown key (did you mean 'iterations'?)",
        ),
        # a path where the experiment names its target
        (
            lambda c: experiment(c).update(target="/mnt/nfs"),
            "experiments.demo.target: '/mnt/nfs' is not a name (letters, digits, '_', '.', '-';"
            " first a letter or digit); name a target defined under targets: (a path goes in"
            " its path:)",
        ),
        # a tool option beside the experiment's keys
        (
            lambda c: experiment(c).update(bs="4k"),
            "experiments.demo.bs: unknown key (the tool's own options go under job: or sweep:)",
        ),
        # a key pasted into the config: the key it may mean, and never the value
        (
            lambda c: c["targets"].update(
                s3={
                    "type": "s3",
                    "endpoint": "http://127.0.0.1:9000",
                    "bucket_prefix": "bench",
                    "credentials": {"access_key": "AKIAEXAMPLE", "secret_key_env": "S"},
                }
            ),
            "targets.s3.credentials.access_key: unknown key (did you mean 'access_key_env'?); a"
            " config never holds a key itself, only the names of the environment variables (or"
            " the file) holding them (the value is not shown)",
        ),
        # no key close to it: nothing guessed
        (
            lambda c: c["hosts"]["clients"].update(password="x"),
            "hosts.clients.password: unknown key",
        ),
    ],
)
def test_an_unknown_key_names_the_key_it_may_mean(mutate, expected):
    assert expected in problems_of(mutate)


def test_a_required_key_misspelt_is_one_problem_not_two():
    """'after: 12s' for a fault's 'at': the unknown key names 'at', so "'at' is a required
    property" is not said beside it; a key that names nothing close leaves it said."""
    fault = {"name": "pause", "host": "localhost", "command": "true", "after": "1s"}

    def with_fault(fault):
        return lambda c: experiment(c).update(allow_faults=True, faults=[fault])

    assert problems_of(with_fault(fault)) == [
        "experiments.demo.faults[0].after: unknown key (did you mean 'at'?)"
    ]
    fault = {"name": "pause", "host": "localhost", "command": "true", "bogus": "1s"}
    assert problems_of(with_fault(fault)) == [
        "experiments.demo.faults[0].bogus: unknown key",
        "experiments.demo.faults[0]: 'at' is a required property",
    ]


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("bs", "4kk", "not a size: '4kk'"),
        ("bs", "-4k", "not a block size or range: '-4k'"),
        ("bs", "4k-8k-16k", "not a block size or range: '4k-8k-16k'"),
        ("bs", 0, "a block size must be more than 0: '0'"),
        ("bs", "0-4k", "a block size must be more than 0: '0-4k'"),
        ("size", "1.5", "size is not a whole number of bytes: '1.5'"),
        ("size", "0x10", "not a size: '0x10'"),
        ("size", "16E", "size is too large: '16E'"),
        ("size", 2**63, "size is too large: '9223372036854775808'"),
        ("size", True, "not a size: 'True'"),
        ("runtime", "-1s", "not a duration: '-1s'"),
        ("runtime", "1e400", "not a duration: '1e400'"),
        ("runtime", float("inf"), "not a duration: inf"),
        ("ramp_time", float("nan"), "not a duration: nan"),
        ("runtime", "9" * 400 + "s", "duration is too long"),
        ("status_interval", "1 fortnight", "not a duration: '1 fortnight'"),
    ],
)
def test_bad_size_or_duration_names_the_option(option, value, expected):
    problems = problems_of(lambda c: experiment(c)["job"].update({option: value}))
    key = f"experiments.demo.job.{option}"
    assert any(p.startswith(f"{key}: {expected}") for p in problems), problems


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("connect_timeout", "0s", "hosts.clients.connect_timeout: must be more than 0s, got '0s'"),
        ("connect_timeout", "-1s", "hosts.clients.connect_timeout: not a duration: '-1s'"),
        (
            "workdir",
            "relative/dir",
            "hosts.clients.workdir: 'relative/dir' is not an absolute path (from /)",
        ),
        (
            "workdir",
            "~/storbench",
            "hosts.clients.workdir: '~/storbench' is not an absolute path (from /); '~' is not"
            " expanded: write the whole path",
        ),
    ],
)
def test_bad_host_settings_name_the_key(key, value, expected):
    problems = problems_of(lambda c: c["hosts"]["clients"].update({key: value}))
    assert any(p.startswith(expected) for p in problems), problems


# --- host ranges --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        ("node[5-3]", "malformed host range 'node[5-3]'"),
        ("node[3-]", "malformed host range 'node[3-]'"),
        ("node[]", "malformed host range 'node[]'"),
        ("a&b", "'a&b' expands to no host"),
        ("n[1-4097]", "'n[1-4097]' expands to 4097 hosts (more than MAX_HOSTS_PER_GROUP = 4096"),
        ("n[1-100000]", "'n[1-100000]' expands to 100000 hosts"),
        ("n[1-1000000000]", "'n[1-1000000000]' expands to 1000000000 hosts"),
        ("n[1-3000],m[1-3000]", "'n[1-3000],m[1-3000]' expands to 6000 hosts"),
        ("n[1-5000]!n[2-5000]", "'n[1-5000]!n[2-5000]' expands to up to 9999 hosts"),
        ("n[1-9]-[1-999]", "'n[1-9]-[1-999]' expands to 8991 hosts"),
        ("*", "bad host name '*'"),
        ("@rack1", "bad host name '@rack1'"),
    ],
)
def test_host_range_problems_name_the_group(nodes, expected):
    problems = problems_of(lambda c: c["hosts"]["clients"].update(nodes=nodes))
    assert any(p.startswith(f"hosts.clients.nodes: {expected}") for p in problems), problems


def test_the_host_cap_itself_is_allowed():
    raw = copy.deepcopy(VALID)
    raw["hosts"]["clients"]["nodes"] = "n[1-4096]"
    names = [host["name"] for host in config.load_campaign(raw).host_groups["clients"]]
    assert len(names) == host_groups.MAX_HOSTS_PER_GROUP == 4096
    assert names[0] == "n1" and names[-1] == "n4096"


# --- values with shell or job-file syntax ---------------------------------------------------


def canaries(folder: Path, tag: str) -> str:
    """Shell syntax that creates <folder>/<tag>-* when run unquoted, in '...' or in "..."."""
    touch = f"touch {folder}/{tag}"
    return f"$({touch}-dollar) `{touch}-backtick` x'$({touch}-quote)'"


@pytest.mark.parametrize("quoting", ["{}", "'{}'", '"{}"'], ids=["bare", "single", "double"])
def test_canaries_are_live_in_a_naive_shell(quoting, tmp_path):
    subprocess.run(["sh", "-c", "echo " + quoting.format(canaries(tmp_path, "c"))], check=True)
    assert list(tmp_path.iterdir()), "the canary text would not show a shell running it"


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda c, s: c["hosts"]["clients"].update(nodes=f"@'{s}'"), "hosts.clients.nodes: bad"),
        (lambda c, s: c["hosts"]["clients"].update(nodes=s), "hosts.clients.nodes: bad host"),
        (lambda c, s: c["hosts"]["clients"].update(user=f"root\n{s}"), "hosts.clients.user: con"),
        (lambda c, s: c["hosts"]["clients"].update(jump=f"a\n{s}"), "hosts.clients.jump: contr"),
        (lambda c, s: c["hosts"]["clients"].update(identity=f"\n{s}"), "hosts.clients.identity:"),
        (lambda c, s: c["hosts"]["clients"].update(workdir=f"/w\n{s}"), "hosts.clients.workdir:"),
        (lambda c, s: c["targets"]["scratch"].update(path=f"/x\n{s}"), "targets.scratch.path: c"),
        (lambda c, s: c["targets"]["scratch"].update(path=f"/x;{s}"), "targets.scratch.path: fi"),
        (lambda c, s: c["targets"]["scratch"].update(path=f"/x#{s}"), "targets.scratch.path: fi"),
        (lambda c, s: c["targets"]["scratch"].update(path="/x:/y"), "targets.scratch.path: fio r"),
        (lambda c, s: c["targets"]["scratch"].update(path="/x/$ncpus"), "targets.scratch.path: f"),
        (lambda c, s: c["targets"]["scratch"].update(path="/x "), "targets.scratch.path: fio s"),
        (lambda c, s: experiment(c)["job"].update(exec_prerun=f"x;{s}"), "job.exec_prerun: fio"),
        (lambda c, s: experiment(c)["job"].update(filename=f"x\r{s}"), "job.filename: control"),
        (lambda c, s: experiment(c)["sweep"].update(rw=[f"read#{s}"]), "sweep.rw[0]: fio cuts"),
        (
            lambda c, s: experiment(c)["sweep"].update(zip={"description": [f"a;{s}"]}),
            "experiments.demo.sweep.zip.description[0]: fio cuts a job-file value at ';'",
        ),
        (
            lambda c, s: c.update(datasets={"d": {"target": "scratch", "job": {"size": f"1;{s}"}}}),
            "datasets.d.job.size: fio cuts a job-file value at ';'",
        ),
        (lambda c, s: experiment(c).update(template=f"/t\n{s}"), "experiments.demo.template: c"),
        (lambda c, s: experiment(c).update(schedule=f"/s\n{s}"), "experiments.demo.schedule: c"),
    ],
)
def test_shell_and_job_file_syntax_is_refused_by_key(mutate, expected, tmp_path):
    problems = problems_of(lambda c: mutate(c, canaries(tmp_path, "pwned")))
    assert any(expected in problem for problem in problems), problems
    assert list(tmp_path.iterdir()) == []  # validating ran nothing


def test_free_text_may_hold_newlines_and_shell_syntax(tmp_path):
    raw = copy.deepcopy(VALID)
    experiment(raw)["description"] = f"line one\nline two; {canaries(tmp_path, 'pwned')}"
    assert config.load_campaign(raw).raw["experiments"]["demo"]["description"].count("\n") == 1
    assert list(tmp_path.iterdir()) == []


# --- values that run: real fio through the CLI steps, over SSH, and under Snakemake ----------

HOSTILE_TEXT = "'q' \"dq\" | & > < * ? ! \\ x <script>alert(1)</script>"


def hostile_campaign(canary_dir: Path, target_dir: Path, hosts: dict, group: str) -> dict:
    """A valid campaign whose target path, description and (swept) file name hold shell syntax."""
    return {
        "hosts": hosts,
        "targets": {"scratch": {"type": "directory", "path": str(target_dir)}},
        "experiments": {
            "hostile": {
                "tool": "fio",
                "hosts": group,
                "target": "scratch",
                "iterations": 1,
                "job": {
                    **VALID["experiments"]["demo"]["job"],
                    "description": f"{canaries(canary_dir, 'description')} {HOSTILE_TEXT}",
                },
                # a file name has no '/': its canary would land in the current folder
                "sweep": {"filename": ["f $(touch pwned-filename) x'`touch pwned-filename`'"]},
            }
        },
    }


def hostile_target(tmp_path: Path, canary_dir: Path) -> Path:
    return tmp_path / f"target dir {canaries(canary_dir, 'path')} 'q' \"dq\" | & > < * ? ! \\ x"


def storbench(workdir: Path, *args: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "storbench", *args], cwd=workdir, capture_output=True, text=True
    )
    assert result.returncode == 0, f"storbench {args[0]} failed:\n{result.stderr[-3000:]}"


def run_by_hand(raw: dict, workdir: Path) -> Path:
    """Render, run and parse the only run with the CLI steps the rules call; its raw folder."""
    campaign = config.load_campaign(raw)
    ((name, _),) = campaign.experiments.items()
    (run,) = campaign.experiment_runs(name)
    folder = workdir / "results" / name
    job = folder / "jobs" / f"{run.run_id}.fio"
    manifest = folder / "raw" / run.run_id / "it1" / "run.json"
    render_spec = plan.to_json(plan.render_spec(campaign, name, run))
    storbench(workdir, "render", "--spec", render_spec, "--output", str(job))
    run_spec = plan.to_json(plan.run_spec(campaign, name, run))
    storbench(workdir, "run", "--spec", run_spec, "--iteration", "1", "--job", str(job),
              "--manifest", str(manifest))  # fmt: skip
    storbench(workdir, "parse", "--manifest", str(manifest), "--output", str(workdir / "it1.pq"))
    assert run.run_id == "write_bs4k_filename-f---touch-pwned-filename--x--touch-pwned-filename--"
    return manifest.parent / json.loads(manifest.read_text())["raw_dir"]


def assert_ran_verbatim(raw: dict, raw_dir: Path, host: str, parquet: Path) -> None:
    """fio read every value as written, wrote the file, and no canary exists."""
    target = Path(raw["targets"]["scratch"]["path"])
    experiment_ = raw["experiments"]["hostile"]
    job = {**experiment_["job"], "filename": experiment_["sweep"]["filename"][0]}
    options = json.loads((raw_dir / f"{host}.json").read_text())["global options"]
    assert options["directory"] == f"{target}/{host}"
    assert (options["description"], options["filename"]) == (job["description"], job["filename"])
    assert (target / host / job["filename"]).stat().st_size == WRITTEN_BYTES
    rows = [r for r in pq.read_table(parquet).to_pylist() if r["host"] == host]
    assert [(r["op"], r["bytes"], r["ios"]) for r in rows] == [("write", WRITTEN_BYTES, 64)]
    assert json.loads(rows[0]["params_json"]) == job


def assert_no_canary(canary_dir: Path, tmp_path: Path) -> None:
    assert list(canary_dir.iterdir()) == []
    # the file name's canary is relative: the current folder of a shell, or an SSH login's home
    assert not any(p.name == "pwned-filename" for p in tmp_path.rglob("*"))
    assert not (Path.home() / "pwned-filename").exists()


def test_shell_syntax_in_values_runs_nothing_on_the_local_transport(tmp_path):
    canary_dir, workdir = tmp_path / "canaries", tmp_path / "work dir"
    canary_dir.mkdir(), workdir.mkdir()
    raw = hostile_campaign(
        canary_dir, hostile_target(tmp_path, canary_dir), VALID["hosts"], "localhost"
    )
    raw_dir = run_by_hand(raw, workdir)
    job_file = next((workdir / "results/hostile/jobs").iterdir()).read_text().splitlines()
    target = raw["targets"]["scratch"]["path"]
    assert f"directory={target}/${{STORBENCH_HOST}}" in job_file
    assert f"description={raw['experiments']['hostile']['job']['description']}" in job_file
    assert_ran_verbatim(raw, raw_dir, "localhost", workdir / "it1.pq")
    assert_no_canary(canary_dir, tmp_path)


def test_shell_syntax_in_values_runs_nothing_over_ssh(ssh_lab, tmp_path):
    canary_dir, workdir = tmp_path / "canaries", tmp_path / "work"
    canary_dir.mkdir(), workdir.mkdir()
    remote_workdir = tmp_path / f"remote wd {canaries(canary_dir, 'workdir')} 'q' | &"
    hosts = ssh_lab.host_groups(1, lambda _: remote_workdir)
    hosts["client1"]["keep_attempts"] = 1  # the job file's copy on the host is looked at below
    raw = hostile_campaign(canary_dir, hostile_target(tmp_path, canary_dir), hosts, "client1")
    raw_dir = run_by_hand(raw, workdir)
    address = ssh_lab.servers[0].address
    assert_ran_verbatim(raw, raw_dir, address, workdir / "it1.pq")
    job_copy = remote_workdir / f"hostile/{raw_dir.parent.parent.name}/it1/{address}/a1/job.fio"
    assert job_copy.read_text() == next((workdir / "results/hostile/jobs").iterdir()).read_text()
    assert_no_canary(canary_dir, tmp_path)


@pytest.mark.parametrize(
    "connection, refusal",
    [
        # OpenSSH refuses the name itself; paramiko passes it on and sshd refuses the login
        ("persistent", "ssh refuses the user name root$(touch"),
        ("per-step", "ssh authentication failed for user root$(touch"),
    ],
)
def test_shell_syntax_in_the_ssh_user_runs_nothing(ssh_lab, tmp_path, connection, refusal):
    canary_dir, workdir = tmp_path / "canaries", tmp_path / "work"
    canary_dir.mkdir(), workdir.mkdir()
    hosts = ssh_lab.host_groups(1, lambda _: tmp_path / "remote")
    hosts["client1"]["user"] = f"root{canaries(canary_dir, 'user')}"
    hosts["client1"]["connection"] = connection
    raw = hostile_campaign(canary_dir, tmp_path / "target", hosts, "client1")
    campaign = config.load_campaign(raw)
    (run,) = campaign.experiment_runs("hostile")
    manifest, job = workdir / "run.json", workdir / "job.fio"
    job.write_text("[never-run]\nrw=read\n")
    result = subprocess.run(
        [sys.executable, "-m", "storbench", "run", "--spec",
         plan.to_json(plan.run_spec(campaign, "hostile", run)), "--iteration", "1",
         "--job", str(job), "--manifest", str(manifest)],
        cwd=workdir, capture_output=True, text=True,
    )  # fmt: skip
    address = ssh_lab.servers[0].address
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"host {address}: {refusal}" in result.stderr
    assert not manifest.exists()
    assert_no_canary(canary_dir, tmp_path)


def test_shell_syntax_and_spaces_run_nothing_under_snakemake(tmp_path):
    canary_dir, workdir = tmp_path / "canaries", tmp_path / "work dir $(x) 'q'"
    canary_dir.mkdir(), workdir.mkdir()
    raw = hostile_campaign(
        canary_dir, hostile_target(tmp_path, canary_dir), VALID["hosts"], "localhost"
    )
    (workdir / "campaign.yaml").write_text(yaml.safe_dump(raw))
    result = snakemake_with(workdir / "campaign.yaml", workdir)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (iteration,) = (workdir / "results/hostile/raw").glob("*/it1")
    raw_dir = iteration / json.loads((iteration / "run.json").read_text())["raw_dir"]
    assert_ran_verbatim(raw, raw_dir, "localhost", workdir / "results/hostile/summary.parquet")
    html = (workdir / "reports/hostile/index.html").read_text()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert_no_canary(canary_dir, tmp_path)


def test_a_read_mix_written_as_a_percentage_is_refused_with_the_number_to_write():
    """fio 3.33 ran rwmixread=70% as 20,260 reads and no writes, and --parse-only takes it."""
    problems = problems_of(
        lambda c: experiment(c).update(sweep={"rw": ["randrw"], "rwmixread": ["70%", 101, 70, -1]})
    )
    assert problems == [
        "experiments.demo.sweep.rwmixread[0]: written without '%' (write 70): fio takes '70%'"
        " but runs no mix",
        "experiments.demo.sweep.rwmixread[1]: a percentage of 0 to 100, not 101",
        # fio 3.33 --parse-only takes -1, and ran randrw rwmixread=-1 as 3 reads, 253 writes
        "experiments.demo.sweep.rwmixread[3]: a percentage of 0 to 100, not -1",
    ]
    problems = problems_of(lambda c: experiment(c)["job"].update(rwmixwrite="30 %"))
    assert problems == [
        "experiments.demo.job.rwmixwrite: written without '%' (write 30): fio takes '30 %' but"
        " runs no mix"
    ]


SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSECRET"


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (
            {"endpoint": f"http://AKIAEXAMPLE:{SECRET}@127.0.0.1:9000"},
            "targets.s3.endpoint: a user or key in the URL (user:key@host) is not allowed; the"
            " keys go under credentials (the value is not shown)",
        ),
        (
            {"credentials": {"access_key_env": "S3_ACCESS", "secret_key_env": SECRET}},
            "targets.s3.credentials.secret_key_env: must be the NAME of an environment variable"
            " (letters, digits, '_'; not first a digit), not its value (the value is not shown:"
            " it may be a key)",
        ),
        (
            {"credentials": {"access_key_env": "S3_ACCESS", "secret_key_env": 4096 * 8191}},
            "targets.s3.credentials.secret_key_env: must be a string (the value is not shown)",
        ),
    ],
    ids=["endpoint-userinfo", "key-for-its-name", "number"],
)
def test_a_key_pasted_into_the_config_is_refused_without_showing_it(target, expected):
    s3 = {
        "type": "s3", "endpoint": "http://127.0.0.1:9000", "bucket_prefix": "sb",
        "credentials": {"access_key_env": "S3_ACCESS", "secret_key_env": "S3_SECRET"}, **target,
    }  # fmt: skip
    problems = problems_of(lambda c: c["targets"].update(s3=s3))
    assert problems == [expected]
    assert SECRET not in " ".join(problems) and str(4096 * 8191) not in " ".join(problems)


def test_a_credentials_file_that_is_not_ini_is_named_without_its_text(tmp_path):
    from storbench.core import secrets

    path = tmp_path / "credentials"
    path.write_text(f"[default]\naws_access_key_id = AK\naws_secret_access_key {SECRET}\n")
    path.chmod(0o600)
    with pytest.raises(secrets.SecretError) as error:
        secrets.target_credentials("s3", {"credentials": {"file": str(path)}})
    assert str(error.value) == (
        f"target s3: {path} is not an INI credentials file (line 3, ParsingError; the text is"
        " not shown)"
    )


def test_a_time_limit_within_the_runs_own_time_is_refused():
    def short_limit(raw):
        experiment(raw).update(timeout="5s", sweep={"runtime": ["2s", "8s"]})
        experiment(raw)["job"]["ramp_time"] = "1s"

    assert problems_of(short_limit) == [
        "experiments.demo.timeout: 5s is within the longest run's runtime and ramp_time (9 s):"
        " every such run would be stopped before its end"
    ]
    raw = copy.deepcopy(VALID)
    experiment(raw).update(timeout="10s", sweep={"runtime": ["2s", "8s"]})
    assert config.load_campaign(raw).experiments["demo"].timeout == 10.0


def test_a_jump_host_with_a_bad_port_is_a_config_problem_not_a_traceback_later():
    problems = problems_of(lambda c: c["hosts"]["clients"].update(jump="admin@bastion:notaport"))
    assert problems == [
        "hosts.clients.jump: jump host must look like user@host:port, got 'admin@bastion:notaport'"
    ]


def test_two_targets_on_one_directory_or_experiments_on_one_bucket_are_refused():
    def same_directory(raw):
        raw["targets"]["again"] = {"type": "directory", "path": "/var/tmp/storbench/scratch/"}

    assert problems_of(same_directory) == [
        "targets.again.path: the same directory as targets.scratch (/var/tmp/storbench/scratch);"
        " one target per place, or their runs could overlap"
    ]

    def nested_directories(raw):
        raw["targets"]["inner"] = {"type": "directory", "path": "/var/tmp/storbench/scratch/a"}
        raw["targets"]["beside"] = {"type": "directory", "path": "/var/tmp/storbench/scratch2"}

    assert problems_of(nested_directories) == [
        "targets.inner.path: /var/tmp/storbench/scratch/a is inside targets.scratch"
        " (/var/tmp/storbench/scratch); each target holds its own lock, so their runs could"
        " overlap: one target, or two folders side by side"
    ]

    def outer_directory(raw):
        raw["targets"] = {
            "inner": {"type": "directory", "path": "/var/tmp/x/y"},
            **raw["targets"],
            "outer": {"type": "directory", "path": "/var/tmp/x"},
        }

    assert problems_of(outer_directory) == [
        "targets.outer.path: /var/tmp/x is around targets.inner (/var/tmp/x/y); each target"
        " holds its own lock, so their runs could overlap: one target, or two folders side by"
        " side"
    ]

    def same_bucket(raw):
        raw["targets"]["s3"] = {
            "type": "s3", "endpoint": "http://127.0.0.1:9000", "bucket_prefix": "sb",
            "credentials": {"access_key_env": "S3_ACCESS", "secret_key_env": "S3_SECRET"},
        }  # fmt: skip
        for name in ("warp_put", "warp-put"):
            raw["experiments"][name] = {"tool": "warp", "hosts": "localhost", "target": "s3"}

    assert problems_of(same_bucket) == [
        "experiments.warp-put: its bucket sb-warp-put is experiment warp_put's too (names fold"
        " to lowercase letters, digits, '.' and '-', 63 at most); rename one"
    ]


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("[j]\nnumjobs={{ num_jobs }}\n", "template {path}: 'num_jobs' is undefined"),
        ("[j]\ndirectory={{ directory }\n", "template {path}:2: unexpected '}}'"),
        (
            "{{ cycler.__init__.__globals__ }}\n",
            "template {path}: refused by the template sandbox: access to attribute '__init__'",
        ),
    ],
    ids=["undefined", "syntax", "sandbox"],
)
def test_check_renders_an_experiments_own_template(template, expected, tmp_path, capsys):
    """As the render step would, before any job: `check` passed all three before."""
    own = tmp_path / "own.fio.j2"
    own.write_text(template)
    raw = copy.deepcopy(VALID)
    experiment(raw)["template"] = str(own)
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(raw))
    code, err = check(path, capsys)
    assert code == 1
    assert f"  - experiments.demo.template: {expected.format(path=own)}" in err, err


def check_own_job(option: str, own: Path, tmp_path: Path, capsys) -> tuple[int, str, int]:
    """`check` of the valid config with own as its template or ready job file: exit code,
    stderr, and the config line naming own."""
    raw = copy.deepcopy(VALID)
    experiment(raw)[option] = str(own)
    if option == "job_file":
        del experiment(raw)["sweep"]
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    line = path.read_text().splitlines().index(f"    {option}: {own}") + 1
    code, err = check(path, capsys)
    return code, err, line


@pytest.mark.parametrize(
    ("option", "name", "what"),
    [("template", "own.fio.j2", "template"), ("job_file", "own.fio", "job file")],
)
def test_an_own_job_file_that_is_not_utf8_is_named_with_its_line(
    option, name, what, tmp_path, capsys
):
    """Before: `check` stopped with a UnicodeDecodeError traceback (a template), or passed
    it and the render step did (a ready job file), after the experiments before it ran."""
    own = tmp_path / name
    own.write_bytes(b"[global]\n; caf\xe9\n[j]\nrw=read\n")
    code, err, line = check_own_job(option, own, tmp_path, capsys)
    assert (code, err.splitlines()[1:]) == (
        1,
        [
            f"  - experiments.demo.{option}: {what} {own}:2: not UTF-8 text (byte 0xe9)"
            f" (line {line})"
        ],
    )


@pytest.mark.parametrize("option", ["template", "job_file"])
def test_an_own_fio_job_with_an_include_is_refused_naming_its_line(option, tmp_path, capsys):
    """fio reads an included file where it runs; the hosts get only the job file, so the run
    failed there (or, run locally, read whatever the folder Snakemake ran in held)."""
    own = tmp_path / ("own.fio.j2" if option == "template" else "own.fio")
    own.write_text("[global]\nioengine=psync\n  include common.fio \n\n[j]\nrw=read\nsize=1m\n")
    code, err, line = check_own_job(option, own, tmp_path, capsys)
    assert (code, err.splitlines()[1:]) == (
        1,
        [
            f"  - experiments.demo.{option}: {own}: line 3: 'include common.fio' is read where"
            " fio runs, and storbench sends the hosts only the job file itself: write the"
            f" included options into it (line {line})"
        ],
    )


def test_snakemake_renders_own_templates_before_any_job(tmp_path):
    """Before: `snakemake` ran the experiments before the one with a broken template, which
    failed at its render step; now it stops at the start, as `check` does."""
    own = tmp_path / "own.fio.j2"
    own.write_text("[j]\nnumjobs={{ num_jobs }}\n")
    raw = copy.deepcopy(VALID)
    raw["targets"]["scratch"]["path"] = str(tmp_path / "scratch")
    raw["experiments"]["later"] = {**experiment(raw), "template": str(own)}
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    line = path.read_text().splitlines().index(f"    template: {own}") + 1
    result = snakemake_with(path, tmp_path)
    assert result.returncode != 0
    assert (
        f"  - experiments.later.template: template {own}: 'num_jobs' is undefined (line {line})"
        in result.stdout + result.stderr
    )
    assert not (tmp_path / "results").exists() and not (tmp_path / "scratch").exists()


def test_an_s3_credentials_file_is_read_when_the_config_is(tmp_path, capsys, monkeypatch):
    """As an identity file is: missing, or without the profile, before any job."""

    def with_file(**credentials):
        def mutate(raw):
            raw["targets"]["s3"] = {
                "type": "s3", "endpoint": "http://127.0.0.1:9000", "bucket_prefix": "sb",
                "credentials": credentials,
            }  # fmt: skip

        return mutate

    absent = tmp_path / "absent"
    assert problems_of(with_file(file=str(absent))) == [
        f"targets.s3.credentials.file: cannot read credentials file {absent}: No such file or"
        " directory"
    ]
    path = tmp_path / "credentials"
    path.write_text(f"[lab]\naws_access_key_id = AK\naws_secret_access_key = {SECRET}\n")
    path.chmod(0o600)
    assert problems_of(with_file(file=str(path), profile="prod")) == [
        f"targets.s3.credentials.file: no profile [prod] in {path}"
    ]
    monkeypatch.delenv("SB_UNSET_KEY", raising=False)
    raw = copy.deepcopy(VALID)
    with_file(access_key_env="SB_UNSET_KEY", secret_key_env="SB_UNSET_KEY")(raw)
    config.load_campaign(raw)  # the runs' environment may set them: a warning only
    assert (
        "storbench: warning: targets.s3.credentials: environment variable SB_UNSET_KEY is not"
        " set or empty"
    ) in capsys.readouterr().err


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda c: experiment(c).update(hosts=[]),
            "experiments.demo.hosts: [] should be non-empty",
        ),
        (
            lambda c: experiment(c).update(target=["scratch", "scratch"]),
            "experiments.demo.target: ['scratch', 'scratch'] has non-unique elements",
        ),
        (
            lambda c: experiment(c).update(hosts=["localhost", "rack 1"]),
            "experiments.demo.hosts[1]: 'rack 1' is not a name (letters, digits, '_', '.', '-';"
            " first a letter or digit)",
        ),
        (
            lambda c: c.update(
                preconditioning={
                    "fill": {
                        "target": "scratch",
                        "passes": [{"name": "p", "fraction": "100%", "bs": "1m"}],
                        "flush": {"poll": "10s"},
                    }
                }
            ),
            "preconditioning.fill.flush: needs wait or command",
        ),
        (
            lambda c: c.update(
                report={"tables": {"t": {"rows": ["blocksize"], "values": ["iops"]}}}
            ),
            "report.tables.t.rows[0]: 'blocksize' is no result column, parameter or label of demo"
            " (did you mean 'bs'?)",
        ),
        (
            lambda c: c["hosts"].update(controller={"transport": "ssh"}),
            "hosts.controller.nodes: host name 'controller' is storbench's own (reserved: all,"
            " controller, logs); name the host otherwise: by its IP address, or by an alias in"
            " ~/.ssh/config",
        ),
    ],
    ids=[
        "empty-hosts",
        "target-twice",
        "name-with-blank",
        "flush-poll-only",
        "synonym",
        "reserved",
    ],
)
def test_a_mistake_is_named_as_what_was_meant(mutate, expected):
    """Each read otherwise before: 'is not of type string' for a list, 'wait is a required
    property', "did you mean 'size'", and advice naming an 'address' key there is not."""
    assert expected in problems_of(mutate)


def test_a_search_objective_is_named_by_its_key_and_written_value():
    def search(**settings):
        def mutate(raw):
            experiment(raw).pop("sweep")
            experiment(raw)["job"]["runtime"] = "10s"
            objective = {"metric": "iops", "latency": "p99", "limit": "2ms"}
            experiment(raw)["search"] = {
                "objective": {**objective, **settings.pop("objective", {})},
                **settings,
            }

        return mutate

    assert problems_of(search(objective={"limit": 0})) == [
        "experiments.demo.search.objective.limit: must be a positive duration, not 0"
    ]
    assert problems_of(search(tolerance="200%")) == [
        "experiments.demo.search.tolerance: must be in (0, 0.5], not '200%'"
    ]
    assert problems_of(search(objective={"limit": 2})) == [
        "experiments.demo.search.objective.limit: give the latency's unit (2ms or 2us): a bare"
        " 2 would read as 2 s"
    ]
    assert problems_of(search(objective={"limit": "2000µs"})) == [
        "experiments.demo.search.objective.limit: not a duration: '2000µs' (expected e.g."
        " 500ms, 5s, 2m, 1h; microseconds are us)"
    ]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda c: c["targets"]["scratch"].update(type="nfs"),
            "targets.scratch.type: must be one of directory, block, s3 (did you mean 'directory'?)",
        ),
        (
            lambda c: c["hosts"]["localhost"].update(transport="SSH"),
            "hosts.localhost.transport: 'SSH' is not one of ['local', 'ssh'] (did you mean 'ssh'?)",
        ),
        (
            lambda c: c.update(report={"units": "MiB"}),
            "report.units: 'MiB' is not one of ['decimal', 'binary'] (did you mean 'binary'?)",
        ),
        (
            lambda c: c["hosts"]["localhost"].update(transport="telnet"),
            "hosts.localhost.transport: 'telnet' is not one of ['local', 'ssh']",
        ),
        (
            lambda c: c.update(report={"tables": {"t": {"rows": ["bs"], "values": ["bandwidth"]}}}),
            "report.tables.t.values[0]: 'bandwidth' is not one of ['bw', 'iops', 'lat_mean',"
            " 'p50', 'p90', 'p99', 'p99.9', 'p99.99'] (did you mean 'bw'?)",
        ),
        # a percentile storbench does not keep is not another one misspelt
        (
            lambda c: c.update(report={"tables": {"t": {"rows": ["bs"], "values": ["p95"]}}}),
            "report.tables.t.values[0]: 'p95' is not one of ['bw', 'iops', 'lat_mean', 'p50',"
            " 'p90', 'p99', 'p99.9', 'p99.99']",
        ),
    ],
    ids=[
        "another-word",
        "case",
        "a-unit-for-its-system",
        "nothing-close",
        "the-other-way-round",
        "a-percentile-not-kept",
    ],
)
def test_a_value_not_allowed_names_the_one_it_may_mean(mutate, expected):
    assert problems_of(mutate) == [expected]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda c: experiment(c)["job"].update(numjobs={"cores": None}),
            "experiments.demo.job.numjobs: {cores} unquoted is a YAML mapping, not a host-fact"
            ' expression: quote it ("{cores}")',
        ),
        (
            lambda c: c.update(network={"mesh": "clients", "port": 30001}),
            "network.mesh: a list goes here ([clients]), not 'clients'",
        ),
        (
            lambda c: c.update(setup={"mount": {"hosts": "clients", "command": "m", "test": "t"}}),
            "setup.mount.test: unknown key (did you mean 'check'?)",
        ),
    ],
    ids=["unquoted-braces", "a-scalar-for-a-list", "ansible-test"],
)
def test_what_yaml_made_of_a_value_is_named_with_how_to_write_it(mutate, expected):
    assert expected in problems_of(mutate)


def test_a_yes_or_no_where_a_word_goes_is_written_as_yaml_writes_it():
    problems = problems_of(lambda c: experiment(c).update(flush=True))
    assert "experiments.demo.flush: true is not one of ['before', 'after']" in problems


def test_a_size_below_the_block_size_is_refused_before_the_run():
    """fio --parse-only takes it; the run stopped with 'size too small'."""
    problems = problems_of(
        lambda c: experiment(c).update(
            job={"size": "64k", "rw": "read"}, sweep={"bs": ["4k", "1m"]}
        )
    )
    assert problems == [
        "experiments.demo.job.size: 64k is smaller than bs 1m: fio refuses to run it"
    ]


def test_a_ready_job_file_holding_its_targets_key_is_refused_without_showing_it(
    tmp_path, capsys, monkeypatch
):
    """results/ and the reports keep every job file as it is: a key pasted into one (or into
    an own template) would be kept there; with the placeholders in its place each passes."""
    monkeypatch.setenv("S3_ACCESS", "AKJOBFILEPLANTED")
    monkeypatch.setenv("S3_SECRET", SECRET)
    key_lines = "s3_config:\n  - access_key: 'AKJOBFILEPLANTED'\n    secret_key: '{}'\n"
    gosbench_job = tmp_path / "own-gosbench.yaml"
    gosbench_job.write_text(key_lines.format(SECRET) + "tests: []\n")
    warp_job = tmp_path / "own.warp"
    warp_job.write_text(f"put\n--duration=1m\n--secret-key={SECRET}\n")
    template = tmp_path / "own-gosbench.yaml.j2"
    template.write_text("# {{ run_id }}\n" + key_lines.format("{{ secret_key }}") + "tests: []\n")
    raw = copy.deepcopy(VALID)
    raw["targets"]["s3"] = {
        "type": "s3", "endpoint": "http://127.0.0.1:9000", "bucket_prefix": "sb",
        "credentials": {"access_key_env": "S3_ACCESS", "secret_key_env": "S3_SECRET"},
    }  # fmt: skip
    raw["experiments"] = {
        "own_gos": {"tool": "gosbench", "hosts": "localhost", "target": "s3",
                    "job_file": str(gosbench_job)},
        "own_warp": {"tool": "warp", "hosts": "localhost", "target": "s3",
                     "job_file": str(warp_job)},
        "own_template": {"tool": "gosbench", "hosts": "localhost", "target": "s3",
                         "template": str(template),
                         "job": {"rw": "write", "bs": "4k", "runtime": "15m"}},
    }  # fmt: skip
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    code, err = check(path, capsys)
    assert code == 1
    assert err.splitlines()[1:] == [
        f"  - experiments.own_gos.job_file: {gosbench_job} holds a key of target s3 on lines 2,"
        " 3 (not shown); job files are kept in results/ and the reports, and storbench gives the"
        " tool the keys itself (write '@@STORBENCH_ACCESS_KEY@@' and '@@STORBENCH_SECRET_KEY@@'"
        " in their place) (line 24)",
        f"  - experiments.own_warp.job_file: {warp_job} holds a key of target s3 on line 3 (not"
        " shown); job files are kept in results/ and the reports, and storbench gives the tool"
        " the keys itself (warp gets them from its environment: leave them out) (line 29)",
        f"  - experiments.own_template.template: {template} holds a key of target s3 on line 3"
        " (not shown); job files are kept in results/ and the reports, and storbench gives the"
        " tool the keys itself (write '@@STORBENCH_ACCESS_KEY@@' and '@@STORBENCH_SECRET_KEY@@'"
        " in their place) (line 34)",
    ]
    assert SECRET not in err and "AKJOBFILEPLANTED" not in err

    placeholders = key_lines.format("@@STORBENCH_SECRET_KEY@@").replace(
        "AKJOBFILEPLANTED", "@@STORBENCH_ACCESS_KEY@@"
    )
    gosbench_job.write_text(placeholders + "tests: []\n")
    warp_job.write_text("put\n--duration=1m\n")
    template.write_text(template.read_text().replace("AKJOBFILEPLANTED", "{{ access_key }}"))
    code, err = check(path, capsys)
    assert (code, err) == (0, ""), err


def test_one_check_names_the_schema_problem_and_the_other_experiments_problems():
    """Before: only the schema's problem; the typo in the other experiment showed only after
    the first was fixed."""

    def two_mistakes(raw):
        second = copy.deepcopy(experiment(raw))
        second["job"]["iodepthh"] = 4
        raw["experiments"]["second"] = second
        experiment(raw)["iterations"] = "many"
        raw["run"] = ["demo", "second"]

    assert problems_of(two_mistakes) == [
        "experiments.demo.iterations: 'many' is not of type 'integer'",
        "experiments.second.job.iodepthh: fio has no option 'iodepthh' (did you mean 'iodepth'?)",
    ]  # and not 'run[0]: unknown experiment', the broken experiment left out of the others


def test_a_schema_problem_outside_the_experiments_is_named_alone():
    def two_mistakes(raw):
        raw["targets"]["scratch"]["type"] = "tape"
        experiment(raw)["job"]["iodepthh"] = 4

    problems = problems_of(two_mistakes)
    assert len(problems) == 1 and problems[0].startswith("targets.scratch.type:"), problems


def test_a_threshold_without_its_sign_names_the_signed_one():
    thresholds = {"p99_ns": "10%", "iops": "5%"}
    problems = problems_of(
        lambda c: c.update(compare=[{"a": "demo", "b": "demo", "thresholds": thresholds}])
    )
    assert (
        "compare[0].thresholds.p99_ns: '10%' is not a rise in percent, with its sign ('+10%')"
        " (did you mean '+10%'?)"
    ) in problems
    assert (
        "compare[0].thresholds.iops: '5%' is not a drop in percent, with its sign ('-5%')"
        " (did you mean '-5%'?)"
    ) in problems


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda c: c["hosts"]["clients"].update(user="root@client01"),
            "hosts.clients.user: 'root@client01' holds a host of the group: the login alone"
            " ('root') goes here",
        ),
        (
            lambda c: c["hosts"]["clients"].update(nodes="root@client[01-02]"),
            "hosts.clients.nodes: bad host name 'root@client01' in 'root@client[01-02]' (up to"
            " 200 letters, digits, '.', '-', '_', first not '.' or '-'; ClusterShell groups such"
            " as '@rack1' are not resolved); the login goes under user: ('root'), the host alone"
            " under nodes:",
        ),
        (
            lambda c: c["hosts"]["clients"].update(nodes="client01:2222"),
            "hosts.clients.nodes: bad host name 'client01:2222' (up to 200 letters, digits, '.',"
            " '-', '_', first not '.' or '-'; ClusterShell groups such as '@rack1' are not"
            " resolved); the port goes under port: (2222), the host alone under nodes:",
        ),
        (
            lambda c: c["hosts"]["clients"].update(transport="clush"),
            "hosts.clients.transport: 'clush' is not one of ['local', 'ssh'] (did you mean 'ssh'?)",
        ),
    ],
    ids=["user-at-host", "user-in-nodes", "port-in-nodes", "clush"],
)
def test_an_ssh_destination_written_whole_names_where_its_parts_go(mutate, expected):
    assert expected in problems_of(mutate)


def test_a_directory_login_with_its_domain_is_a_login():
    raw = copy.deepcopy(VALID)
    raw["hosts"]["clients"]["user"] = "jdoe@corp.example.com"
    raw["experiments"]["demo"]["hosts"] = "clients"
    assert config.load_campaign(raw).hosts_of("demo")[0]["user"] == "jdoe@corp.example.com"
