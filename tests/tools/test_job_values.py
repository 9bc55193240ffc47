"""Job values per tool: what would be cut, split or expanded in a tool's job file is refused.

Each tool adapter says which values its job file cannot hold (ToolAdapter.job_value_problem,
target_path_problem); config names the key. vdbench's rules follow its parameter scanner
(Vdb_scan, see storbench.tools.vdbench); elbencho's follow boost's config file parser and its
path handling; warp and GOSBench values need nothing but carry hostile text verbatim.
"""

from __future__ import annotations

import copy
import subprocess

import pytest
import yaml

from storbench import cli
from storbench.config import campaign as config
from storbench.plan import specs as plan
from storbench.run.render import render_job
from storbench.tools import get_tool, known_tools
from storbench.tools.base import ARGS_FILE_LOOP, SECRET_PLACEHOLDERS, job_file_text

HOSTS = {"localhost": {"transport": "local"}}
DIRECTORY = {"type": "directory", "path": "/srv/bench"}
S3 = {
    "type": "s3",
    "endpoint": "http://127.0.0.1:9000",
    "bucket_prefix": "storbench",
    "credentials": {"access_key_env": "S3_ACCESS_KEY", "secret_key_env": "S3_SECRET_KEY"},
}
BASE_JOBS = {  # a valid job of each tool; the cases add or replace options
    "vdbench": {"rw": "randread", "bs": "4k", "size": "64m", "runtime": "10s"},
    "elbencho": {"rw": "read", "bs": "4k", "size": "1m"},
    "warp": {"op": "put", "bs": "4k", "runtime": "10s"},
    "gosbench": {"rw": "write", "bs": "4k", "runtime": "10s"},
}
HOSTILE = "$(touch pwned) `touch pwned` 'q' \"dq\" | & ; # -x --insecure"


def campaign(tool: str, job: dict, *, target: dict | None = None, sweep=None) -> dict:
    default_target = S3 if tool in ("warp", "gosbench") else DIRECTORY
    experiment = {
        "tool": tool,
        "hosts": "localhost",
        "target": "t",
        "job": {**BASE_JOBS[tool], **job},
    }
    if sweep:
        experiment["sweep"] = sweep
    return {
        "hosts": copy.deepcopy(HOSTS),
        "targets": {"t": dict(target or default_target)},
        "experiments": {"e": experiment},
    }


def problems_of(raw: dict) -> list[str]:
    with pytest.raises(config.ConfigError) as caught:
        config.load_campaign(raw)
    return caught.value.problems


def rendered(raw: dict) -> list[str]:
    """The job file of the experiment's only run, as lines."""
    loaded = config.load_campaign(raw)
    (run,) = loaded.experiment_runs("e")
    return render_job(plan.render_spec(loaded, "e", run)).splitlines()


def check_exit(raw: dict, tmp_path, capsys) -> tuple[int, str]:
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(raw))
    code = cli.main(["check", "--config", str(path)])
    return code, capsys.readouterr().err


# --- vdbench -------------------------------------------------------------------------------

BLANK = "vdbench ends a parameter line at a blank"
COMMA = "vdbench reads ',' outside parentheses as the start of another parameter"


@pytest.mark.parametrize(
    ("job", "sweep", "expected"),
    [
        ({"wd_xfersize": "4k 8k"}, None, f"experiments.e.job.wd_xfersize: {BLANK}"),
        ({"rd_pause": "5,warmup=2"}, None, f"experiments.e.job.rd_pause: {COMMA}"),
        ({"iodepth": "8,"}, None, f"experiments.e.job.iodepth: {COMMA}"),  # joins the next line
        (
            {"openflags": "(o_direct"},
            None,
            "experiments.e.job.openflags: vdbench reads the rest of the line into an unclosed '('",
        ),
        ({"rate": "max)"}, None, "experiments.e.job.rate: vdbench stops on a ')' without its '('"),
        ({"run_name": 'a"b'}, None, "experiments.e.job.run_name: vdbench reads '\"' as a quote"),
        (
            {"workload_name": "w[1]^x"},
            None,
            "experiments.e.job.workload_name: vdbench turns '[' into a blank, '^' into ','",
        ),
        ({"vdbench_dir": "$HOME/vdbench"}, None, "experiments.e.job.vdbench_dir: vdbench replaces"),
        ({"rd_pause": "!pause"}, None, "experiments.e.job.rd_pause: vdbench replaces $name and !"),
        ({"sd_size": "#hosts"}, None, "experiments.e.job.sd_size: vdbench replaces #host and #ho"),
        (
            {"forxfersize": "4k, 64 k"},
            None,
            f"experiments.e.job.forxfersize: item '64 k': {BLANK}",
        ),
        (
            {"forrdpct": "(0,70),rd=(x)"},
            None,
            "experiments.e.job.forrdpct: item '70)': vdbench stops on a ')' without its '('",
        ),
        (
            {"vdbench_hosts": "c1, c2(x"},
            None,
            "experiments.e.job.vdbench_hosts: item 'c2(x': vdbench reads the rest of the line",
        ),
        ({}, {"wd_rdpct": ["50", "50,seekpct=0"]}, f"experiments.e.sweep.wd_rdpct[1]: {COMMA}"),
        (
            {},
            {"zip": {"iodepth": [1, 2], "rd_pause": ["1", "2 3"]}},
            f"experiments.e.sweep.zip.rd_pause[1]: {BLANK}",
        ),
        # seekpct: a percentage, or one of vdbench's words
        ({"seekpct": "eofx"}, None, "experiments.e.job.seekpct: vdbench has no seekpct=eofx (d"),
        (
            {"forseekpct": "0,sequental"},
            None,
            "experiments.e.job.forseekpct: vdbench has no seekpct=sequental (did you mean 'seq",
        ),
        (
            {},
            {"seekpct": [0, 150]},
            "experiments.e.sweep.seekpct[1]: seekpct is a percentage of random seeks (0 to 100)",
        ),
        # host expressions stand as numbers: the text around them is what counts
        ({"rd_pause": "{cores},warmup=2"}, None, f"experiments.e.job.rd_pause: {COMMA}"),
        (
            {"rd_pause": SECRET_PLACEHOLDERS["secret_key"]},
            None,
            "experiments.e.job.rd_pause: holds a key placeholder; the runner would write",
        ),
    ],
)
def test_vdbench_values_that_break_a_parameter_line_are_refused(job, sweep, expected):
    problems = problems_of(campaign("vdbench", job, sweep=sweep))
    assert any(problem.startswith(expected) for problem in problems), problems


@pytest.mark.parametrize("value", ["eof", "sequential", "seq", "random", "100", "0", "37.5"])
def test_vdbench_takes_seekpcts_words_and_percentages(value):
    loaded = config.load_campaign(campaign("vdbench", {"seekpct": value}))
    assert loaded.experiments["e"].job["seekpct"] == value


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/srv/my data", BLANK),
        ("/srv/a,b", COMMA),
        ("/srv/$USER", "vdbench replaces $name and !name"),
        ("/srv/#host", "vdbench replaces #host"),
        ("/srv/x(", "vdbench reads the rest of the line into an unclosed '('"),
    ],
)
def test_vdbench_target_paths_are_checked_as_vdbench_reads_them(path, expected):
    target = {"type": "block", "path": path}
    problems = problems_of(campaign("vdbench", {}, target=target))
    assert f"targets.t.path: {expected}" in "\n".join(problems), problems


def test_vdbench_lists_and_ranges_render_verbatim():
    job = {
        "rw": "randrw",
        "rwmixread": 70,
        "iodepth": 4,
        "openflags": "(o_direct,o_sync)",
        "wd_xfersize": "(4k,50,8k,50)",
        "forthreads": "1-64,d",
        "forrdpct": "(0, 70, 100)",
    }
    raw = campaign("vdbench", job)
    del raw["experiments"]["e"]["job"]["bs"]
    assert rendered(raw)[1:] == [
        "sd=sd1,lun=/srv/bench/$storbench_host/vdb.file,size=64m,threads=4,"
        "openflags=(o_direct,o_sync)",
        "wd=wd1,sd=sd1,rdpct=70,seekpct=100,xfersize=(4k,50,8k,50)",
        "rd=rd1,wd=wd1,iorate=max,elapsed=10,interval=1,forrdpct=(0,70,100),forthreads=(1-64,d)",
    ]


def test_vdbench_accepts_host_expressions_and_characters_it_reads_literally():
    job = {"rd_pause": "{max(1, cores // 2)}", "sd_name": "a=b*c#d/e"}  # '*#/' only lead lines
    loaded = config.load_campaign(campaign("vdbench", job))
    assert loaded.experiments["e"].job["sd_name"] == "a=b*c#d/e"
    assert job_file_text("{max(1, cores // 2)}") == "0"
    assert job_file_text("x-{cores}-{{y}}") == "x-0-{y}"  # braces doubled are literal ones


@pytest.mark.parametrize(
    "injection",
    [
        ("job", "rd_pause", '5,start_cmd="touch {canary}"'),
        ("job", "rd_pause", "5,start_cmd=(touch,{canary})"),
        ("job", "forxfersize", '4k),start_cmd=("touch {canary}"'),
        ("path", None, '/srv/x,start_cmd="touch {canary}"'),
    ],
    ids=["quoted", "list", "for-loop", "target-path"],
)
def test_vdbench_start_cmd_injection_is_refused(injection, tmp_path, capsys, monkeypatch):
    """The value would add start_cmd= (vdbench runs it before the run); check refuses it."""
    monkeypatch.chdir(tmp_path)
    where, option, template = injection
    value = template.format(canary=tmp_path / "canary")
    if where == "path":
        raw = campaign("vdbench", {}, target={"type": "block", "path": value})
        key = "targets.t.path: "
    else:
        raw = campaign("vdbench", {option: value})
        key = f"experiments.e.job.{option}: "
    unchecked = render_job(
        {
            "experiment": "e",
            "run_id": "r",
            "tool": "vdbench",
            "target": {"name": "t", **raw["targets"]["t"]},
            "params": raw["experiments"]["e"]["job"],
            "point": {},
            "hosts": ["localhost"],
            "template": None,
            "job_file": None,
        }
    )
    assert ",start_cmd=" in unchecked  # without the check the parameter file would hold it
    code, err = check_exit(raw, tmp_path, capsys)
    assert code == 1 and "Traceback" not in err
    (line,) = [line for line in err.splitlines() if line.startswith(f"  - {key}")]
    assert "vdbench" in line
    assert list(tmp_path.iterdir()) == [tmp_path / "campaign.yaml"]  # no canary, no output


def test_a_target_gets_the_rules_of_every_tool_using_it():
    raw = campaign("vdbench", {}, target={"type": "directory", "path": "/srv/a;b c"})
    raw["experiments"]["f"] = {
        "tool": "fio",
        "hosts": "localhost",
        "target": "t",
        "job": {"rw": "read", "size": "1m"},
    }
    problems = problems_of(raw)
    assert [p for p in problems if p.startswith("targets.t.path: ")] == [
        "targets.t.path: fio cuts a job-file value at ';' (a comment); the value cannot hold it",
        f"targets.t.path: {BLANK} (the rest is ignored); no blanks",
    ]


# --- elbencho ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        ({"opslog": "/tmp/ops#1"}, "experiments.e.job.opslog: elbencho's config file parser cuts"),
        ({"blockvarpct": " 50"}, "experiments.e.job.blockvarpct: elbencho's config file parser "
                                 "strips leading and trailing blanks"),
        ({"opslog": SECRET_PLACEHOLDERS["access_key"]}, "experiments.e.job.opslog: holds a key"),
    ],
)  # fmt: skip
def test_elbencho_values_its_config_file_cannot_hold_are_refused(job, expected):
    problems = problems_of(campaign("elbencho", job))
    assert any(problem.startswith(expected) for problem in problems), problems


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/data/dir[1-4]", "elbencho expands a number list or range in '[...]' into several"),
        ("/data/a,b", "elbencho services split paths at ','"),
        ("/data/user@host", "elbencho services split paths at '@'"),
        ("/data/{host}/x", "storbench's elbencho command replaces {host} with the host's name"),
    ],
)
def test_elbencho_target_paths_that_would_change_are_refused(path, expected):
    problems = problems_of(campaign("elbencho", {}, target={"type": "directory", "path": path}))
    assert f"targets.t.path: {expected}" in "\n".join(problems), problems


def test_elbencho_path_with_blanks_and_values_with_shell_syntax_render_verbatim():
    value = "/tmp/ops log;$(touch pwned) 'q' \"dq\" [1-2]"  # one option line, read whole
    raw = campaign(
        "elbencho",
        {"opslog": value},
        target={"type": "directory", "path": "/srv/my data [x]"},
    )
    lines = rendered(raw)
    assert "#storbench-path=/srv/my data [x]/{host}" in lines
    assert f"opslog={value}" in lines


# --- warp and GOSBench ---------------------------------------------------------------------


def test_warp_value_stays_one_argument_with_shell_and_flag_syntax(tmp_path):
    raw = campaign("warp", {"prefix": HOSTILE})
    lines = rendered(raw)
    assert f"--prefix={HOSTILE}" in lines
    job = tmp_path / "job.warp"
    job.write_text("\n".join(lines) + "\n")
    script = f'job=$1; {ARGS_FILE_LOOP}; printf "%s\\n" "$@"'
    done = subprocess.run(
        ["sh", "-c", script, "args", str(job)], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert f"--prefix={HOSTILE}" in done.stdout.splitlines()
    assert "--insecure" not in done.stdout.splitlines()  # not a flag of its own
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.warp"]  # nothing ran


def test_gosbench_value_cannot_add_a_yaml_key():
    value = 'x": 1, injected: true # $(touch pwned) | & ; -x'
    lines = rendered(campaign("gosbench", {"object_prefix": value}))
    assert '    object_prefix: "x\\": 1, injected: true # $(touch pwned) | \\u0026 ; -x"' in lines
    test = yaml.safe_load("\n".join(lines))["tests"][0]
    assert test["object_prefix"] == value and "injected" not in test


@pytest.mark.parametrize("tool", ["warp", "gosbench"])
def test_s3_tools_refuse_a_key_placeholder_in_a_value(tool):
    job = {"object_prefix" if tool == "gosbench" else "prefix": SECRET_PLACEHOLDERS["secret_key"]}
    problems = problems_of(campaign(tool, job))
    option = next(iter(job))
    assert f"experiments.e.job.{option}: holds a key placeholder" in "\n".join(problems)


def test_every_adapter_answers_the_same_interface():
    for name in known_tools():
        adapter = get_tool(name)
        assert adapter.job_value_problem("bs", "4k") is None
        assert adapter.target_path_problem("/srv/bench") is None
    assert get_tool("fio").job_value_problem("description", "a;b") == (
        "fio cuts a job-file value at ';' (a comment); the value cannot hold it"
    )
    assert get_tool("warp").job_value_problem("prefix", HOSTILE) is None


@pytest.mark.parametrize("endpoint", ["http://a,b:9000", "http://s3.lab/x,y", "http://s3 lab"])
def test_an_s3_endpoint_that_would_read_as_two_is_refused(endpoint):
    raw = campaign("warp", {}, target={**S3, "endpoint": endpoint})
    (problem,) = problems_of(raw)
    assert problem == (
        f"targets.t.endpoint: '{endpoint}' is not the S3 server's URL,"
        " http(s)://host[:port][/path] (no ',': the tools would read two endpoints)"
    )


@pytest.mark.parametrize(
    ("endpoint", "hint"),
    [
        (
            "127.0.0.1:9000",
            "; with its scheme: 'http://127.0.0.1:9000' or 'https://127.0.0.1:9000'",
        ),
        (
            "s3://bench",
            "; s3:// names a bucket, not a server (the bucket comes from bucket_prefix)",
        ),
    ],
)
def test_an_s3_endpoint_without_its_http_scheme_names_what_was_meant(endpoint, hint):
    raw = campaign("warp", {}, target={**S3, "endpoint": endpoint})
    (problem,) = problems_of(raw)
    assert problem.endswith(f"(no ',': the tools would read two endpoints){hint}")


@pytest.mark.parametrize("endpoint", ["https://s3.example.com/base", "http://[::1]:9000"])
def test_host_port_path_and_ipv6_endpoints_pass(endpoint):
    config.load_campaign(campaign("elbencho", {}, target={**S3, "endpoint": endpoint}))
