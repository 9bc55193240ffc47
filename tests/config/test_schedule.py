"""Schedule files named as the VAST/Intel scale-test guide names their workloads.

The guide is tests/fixtures/seeds/000_0a2213660d73e136.txt; its workload lines and the job
names it shows are quoted below with their line numbers.
"""

from __future__ import annotations

import re

import pytest

from storbench.config.schedule import ScheduleEntry, ScheduleError, parse_schedule, schedule_runs
from tests.paths import FIXTURES

GUIDE = FIXTURES / "seeds" / "000_0a2213660d73e136.txt"
# guide line 1199, name on line 1201
GUIDE_RANDREAD = (
    "--rw=randread --numjobs=16 --iodepth=8 --bs=1024k --size=30g --runtime=300 --ramp_time=60"
)
# guide line 1211, name on line 1213
GUIDE_READ = "--rw=read --numjobs=16 --iodepth=8 --bs=1024k --size=30g --runtime=300 --ramp_time=60"
# guide line 1217, name on line 1219 (there the 5th workload of its file)
GUIDE_TAGGED = GUIDE_READ + " --tag=1"
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # the workflow's run_id wildcard


def guide_line(number: int) -> str:
    return GUIDE.read_text().splitlines()[number - 1]


def names(text: str) -> list[str]:
    return [entry.name for entry in parse_schedule(text, "test.sch")]


def test_the_quoted_lines_are_the_guides():
    assert f"`{GUIDE_RANDREAD}`" in guide_line(1199)
    assert "`rd_rnd_qd_128_1024k_16w.ini`" in guide_line(1201)
    assert f"`{GUIDE_READ}`" in guide_line(1211)
    assert "`rd_qd_128_1024k_16w.ini`" in guide_line(1213)
    assert f"`{GUIDE_TAGGED}`" in guide_line(1217)
    assert "`rd_qd_128_1024k_16w_5tag.ini`" in guide_line(1219)


def test_the_guides_workloads_get_the_guides_names():
    schedule = "\n".join(
        [
            "# bandwidth test",
            GUIDE_RANDREAD,
            GUIDE_READ,
            "",
            GUIDE_READ.replace("--rw=read", "--rw=write"),
            GUIDE_READ.replace("--rw=read", "--rw=randwrite"),
            "   # comment lines do not count as workloads",
            GUIDE_TAGGED,  # the 5th workload, as in the guide's example
        ]
    )
    assert names(schedule) == [
        "rd_rnd_qd_128_1024k_16w",
        "rd_qd_128_1024k_16w",
        "wr_qd_128_1024k_16w",
        "wr_rnd_qd_128_1024k_16w",
        "rd_qd_128_1024k_16w_5tag",
    ]


def test_params_use_storbenchs_names_and_values():
    first, tagged = parse_schedule(f"{GUIDE_RANDREAD}\n\n{GUIDE_TAGGED}\n", "bw.sch")
    assert first == ScheduleEntry(
        name="rd_rnd_qd_128_1024k_16w",
        line=1,
        params={
            "rw": "randread",
            "numjobs": 16,
            "iodepth": 8,
            "bs": "1024k",
            "size": "30g",
            "runtime": 300,
            "ramp_time": 60,
        },
    )
    assert tagged.line == 3
    assert tagged.name == "rd_qd_128_1024k_16w_2tag"
    assert "tag" not in tagged.params  # a harness option, never passed to fio


def test_single_dash_harness_options_and_create_only():
    # guide line 809: "-create_only" in a schedule file; line 428: "-size" for fio
    line = "-rw=read -numjobs=16 -iodepth=8 -bs=1024k -size=150g -create_only"
    (entry,) = parse_schedule(line, "iops_test_100g.sch")
    assert entry.params["create_only"] == 1
    assert entry.params["size"] == "150g"
    assert entry.name == "rd_qd_128_1024k_16w_co"
    # the create pass and the measured pass of one workload get different names
    assert names(f"{line}\n{line.replace(' -create_only', '')}") == [
        "rd_qd_128_1024k_16w_co",
        "rd_qd_128_1024k_16w",
    ]


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ("--rw=randrw --rwmixread=70", "70rd_rnd_qd_128_4k_16w"),
        ("--rw=rw --rwmixwrite=30", "70rd_qd_128_4k_16w"),
        ("--readwrite=randrw", "50rd_rnd_qd_128_4k_16w"),  # fio's default mix
        ("--rw=randtrim", "tr_rnd_qd_128_4k_16w"),
        ("--rw=randread:8", "rd_rnd_qd_128_4k_16w"),
    ],
)
def test_mixed_and_other_patterns(options, name):
    assert names(f"{options} --numjobs=16 --iodepth=8 --bs=4k") == [name]


def test_aliases_become_storbench_option_names():
    (entry,) = parse_schedule("--readwrite=read --blocksize=4k --numjobs=1 --iodepth=1", "a")
    assert entry.params == {"rw": "read", "bs": "4k", "numjobs": 1, "iodepth": 1}


def test_duplicate_names_get_the_guides_tag_suffix():
    schedule = "\n".join([GUIDE_READ, GUIDE_RANDREAD, GUIDE_READ, GUIDE_READ])
    assert names(schedule) == [
        "rd_qd_128_1024k_16w",
        "rd_rnd_qd_128_1024k_16w",
        "rd_qd_128_1024k_16w_3tag",
        "rd_qd_128_1024k_16w_4tag",
    ]


def test_names_are_valid_run_ids():
    line = "--rw=randread --numjobs=2 --iodepth=4 --bs=4k,8k --filename=a#b  # trailing comment"
    (entry,) = parse_schedule(line, "x.sch")
    assert entry.name == "rd_rnd_qd_8_4k-8k_2w"
    assert RUN_ID.match(entry.name)
    assert entry.params["filename"] == "a#b"  # '#' inside a word is not a comment


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("rw=read --bs=4k", "bad token 'rw=read': expected --option=value"),
        ("--rw=read --bs= --numjobs=1 --iodepth=1", "bad token '--bs=': empty value"),
        ("--rw=read --bs=4kk --numjobs=1 --iodepth=1", "bad token '--bs=4kk': not a size"),
        ("--rw=read --bs=4k --numjobs=sixteen --iodepth=1", "bad token '--numjobs=sixteen'"),
        ("--rw=readd --bs=4k --numjobs=1 --iodepth=1", "bad token '--rw=readd': unknown rw"),
        ("--rw=read --bs=4k --numjobs=1 --iodepth=1 --tag=2", "bad token '--tag=2'"),
        ("--rw=read --bs=4k --numjobs=1 --iodepth=1 -bs=8k", "option 'bs' given twice"),
        ("--rw=read --bs=4k --numjobs=1 --iodepth=1 --runtime=5x", "bad token '--runtime=5x'"),
        ("--rw=randrw --rwmixread=170 --bs=4k --numjobs=1 --iodepth=1", "'--rwmixread=170'"),
        ("--rw=read --bs=4k --numjobs=1 --iodepth=1 -rwmixreadhost=70", "experiment setting"),
        ("--rw=read --bs=4k", "missing --numjobs, --iodepth"),
        ("--rw=read --bs='4k", "No closing quotation"),
    ],
)
def test_bad_lines_name_file_line_and_token(line, message):
    with pytest.raises(ScheduleError) as raised:
        parse_schedule(f"# header\n{GUIDE_READ}\n{line}\n", "sweep.sch")
    assert str(raised.value).startswith("sweep.sch:3: ")
    assert message in str(raised.value)


def test_schedule_runs_reads_a_file(tmp_path):
    path = tmp_path / "bw_test_short_100g.sch"
    path.write_text(f"{GUIDE_RANDREAD}\n{GUIDE_READ}\n")
    runs = schedule_runs(path)
    assert [run_id for run_id, _ in runs] == ["rd_rnd_qd_128_1024k_16w", "rd_qd_128_1024k_16w"]
    assert runs[1][1]["rw"] == "read"


def test_schedule_runs_errors_name_the_file(tmp_path):
    empty = tmp_path / "empty.sch"
    empty.write_text("# nothing yet\n\n")
    with pytest.raises(ScheduleError, match=r"empty\.sch: no workloads"):
        schedule_runs(empty)
    with pytest.raises(ScheduleError, match=r"missing\.sch: cannot read schedule file"):
        schedule_runs(tmp_path / "missing.sch")


def test_host_fact_values_are_kept_for_each_host_and_named_once(tmp_path):
    """A schedule sized per client (threads = its cores, size = 2 x its RAM per thread)."""
    from storbench.config import campaign as config
    from storbench.run import show_plan

    text = (
        "--rw=randread --numjobs={cores} --iodepth=8 --bs=4k '--size={2 * mem // cores}'\n"
        "--rw=write --numjobs={cores} --iodepth=1 --bs=1m --size={2*mem//cores}\n"
    )
    entries = parse_schedule(text, "hosts.sch")
    assert [e.name for e in entries] == ["rd_rnd_qd_host_4k_hostw", "wr_qd_host_1m_hostw"]
    assert entries[0].params["numjobs"] == "{cores}"
    assert entries[0].params["size"] == "{2 * mem // cores}"
    with pytest.raises(ScheduleError, match=r"hosts.sch:1: bad token '--runtime=\{ram\}'.*'ram'"):
        parse_schedule("--rw=read --numjobs=1 --iodepth=1 --bs=4k --runtime={ram}\n", "hosts.sch")
    path = tmp_path / "hosts.sch"
    path.write_text(text)
    campaign = config.load_campaign(
        {
            "hosts": {"h": {"transport": "local"}},
            "targets": {"t": {"type": "directory", "path": str(tmp_path / "t")}},
            "experiments": {
                "s": {"tool": "fio", "hosts": "h", "target": "t", "schedule": str(path),
                      "job": {"runtime": "60s"}}
            },
        }
    )  # fmt: skip
    assert campaign.experiments["s"].uses_host_facts  # rendered per host from telemetry
    shown = show_plan.describe_campaign(campaign)
    assert "| size={2 * mem // cores}" in shown and "| numjobs={cores}" in shown
