"""Datasets and recipes on paper: stage ids and sizes, experiment job options, state labels,
token paths, and one clear problem per bad key. No Snakemake, no fio."""

import copy
import json

import pytest

from storbench.config.campaign import ConfigError, load_campaign
from storbench.core import units
from storbench.core.specs import StageSpec
from storbench.plan import preparation as prepare_plan
from storbench.plan import specs as plan_specs

MIB = 1 << 20
RUN = {"rw": "randread", "bs": "4k", "runtime": "1s"}

BASE = {
    "hosts": {"localhost": {"transport": "local"}},
    "targets": {
        "scratch": {"type": "directory", "path": "/var/tmp/sb", "capacity": "64MiB"},
        "dev": {"type": "block", "path": "/dev/nvme0n1", "capacity": "64MiB"},
    },
    "datasets": {
        "d": {"target": "scratch", "job": {"size": "16MiB", "nrfiles": 2, "numjobs": 2}},
    },
    "preconditioning": {
        "afa": {
            "target": "scratch",
            "job": {"ioengine": "libaio", "direct": 1, "iodepth": 8},
            "passes": [{"name": "fill", "fraction": "85%", "bs": "128k"}],
            "flush": {"wait": "10s"},
        },
    },
    "experiments": {
        "on_dataset": {"tool": "fio", "hosts": "localhost", "target": "scratch",
                       "dataset": "d", "job": dict(RUN)},
        "before": {"tool": "fio", "hosts": "localhost", "target": "scratch",
                   "precondition": "afa", "flush": "before", "job": dict(RUN)},
        "after": {"tool": "fio", "hosts": "localhost", "target": "scratch",
                  "precondition": "afa", "job": dict(RUN)},
    },
}  # fmt: skip


def campaign_of(mutate=lambda raw: None):
    raw = copy.deepcopy(BASE)
    mutate(raw)
    return load_campaign(raw)


def problems_of(mutate) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        campaign_of(mutate)
    return caught.value.problems


def recipe(raw: dict) -> dict:
    return raw["preconditioning"]["afa"]


# --- stages -------------------------------------------------------------------------------------


def full_recipe(raw: dict) -> None:
    recipe(raw).update(
        purge="blkdiscard /dev/nvme0n1",
        wipc={"repeat": 2, "bs": "128k"},
        passes=[
            {"name": "precondition", "fraction": "85%", "bs": "128k", "repeat": 2},
            {"name": "aging", "fraction": "5%", "bs": "4k", "pattern": "random"},
        ],
        chunk="16MiB",
        rounds={"job": {"rw": "randwrite", "runtime": "1s"}, "sweep": {"bs": ["4k", "64k"]},
                "max_rounds": 6},
    )  # fmt: skip


def test_stages_run_purge_wipc_passes_in_chunks_then_rounds_in_order():
    afa = campaign_of(full_recipe).recipes["afa"]
    stages = afa.stages()
    chunks = ["c1", "c2", "c3", "c4"]
    assert [s.stage_id for s in stages] == [
        "purge",
        *[f"p1-wipc-r{r}-{c}" for r in (1, 2) for c in chunks],
        *[f"p2-precondition-r{r}-{c}" for r in (1, 2) for c in chunks],
        "p3-aging-r1",  # 5 % of 64 MiB fits in one 16 MiB chunk: no chunk suffix
        *[f"round-0{n}" for n in range(1, 7)],
    ]
    assert [s.index for s in stages] == list(range(1, 25))
    assert [s.kind for s in stages] == ["purge"] + ["pass"] * 17 + ["round"] * 6
    assert [s.round for s in stages[-6:]] == [1, 2, 3, 4, 5, 6]


def test_pass_sizes_are_whole_blocks_and_chunks_cover_the_pass():
    afa = campaign_of(full_recipe).recipes["afa"]
    wipc, precondition, aging = afa.passes
    assert afa.slice_bytes == 64 * MIB
    assert (wipc.fraction, wipc.bs, wipc.repeat, wipc.pattern) == (1.0, 131072, 2, "sequential")
    assert afa.pass_bytes(wipc) == 64 * MIB
    # floor(0.85 * 64 MiB / 128 KiB) = floor(435.2) = 435 blocks of 128 KiB
    assert afa.pass_bytes(precondition) == 435 * 131072 == 57016320
    assert afa.chunk_bytes(precondition) == 16 * MIB
    assert afa.chunk_count(precondition) == 4  # 3 full chunks and 6684672 bytes (51 blocks)
    # floor(0.05 * 64 MiB) = 3355443 bytes, down to 819 blocks of 4 KiB
    assert afa.pass_bytes(aging) == 819 * 4096 == 3354624
    assert afa.chunk_count(aging) == 1


def test_stage_spec_of_the_last_chunk():
    afa = campaign_of(full_recipe).recipes["afa"]
    last = next(s for s in afa.stages() if s.stage_id == "p2-precondition-r2-c4")
    spec = prepare_plan.stage_spec(afa, last).to_dict()
    assert spec["stage"] == "p2-precondition-r2-c4"
    assert spec["index"] == 1 + 8 + 8
    assert spec["pass"] == {
        "name": "precondition",
        "number": 2,
        "repeat": 2,
        "repeats": 2,
        "chunk": 4,
        "chunks": 4,
        "fraction": 0.85,
        "bs": 131072,
        "pattern": "sequential",
        "compressibility": None,
        "pass_bytes": 57016320,
        "chunk_bytes": 16 * MIB,
    }
    purge = prepare_plan.stage_spec(afa, afa.stages()[0]).to_dict()
    assert purge["command"] == "blkdiscard /dev/nvme0n1"


def test_without_chunk_a_pass_is_one_stage_per_repeat():
    afa = campaign_of(lambda raw: recipe(raw)["passes"][0].update(repeat=3)).recipes["afa"]
    assert [s.stage_id for s in afa.stages()] == ["p1-fill-r1", "p1-fill-r2", "p1-fill-r3"]
    assert afa.chunk_bytes(afa.passes[0]) == afa.pass_bytes(afa.passes[0]) == 57016320


@pytest.mark.parametrize(
    ("max_rounds", "first", "last"),
    [(5, "round-01", "round-05"), (25, "round-01", "round-25"), (100, "round-001", "round-100")],
)
def test_round_ids_are_zero_padded_to_the_last_round(max_rounds, first, last):
    def rounds(raw):
        recipe(raw)["passes"] = []
        recipe(raw)["rounds"] = {"job": {"rw": "randwrite", "runtime": "1s"},
                                 "max_rounds": max_rounds}  # fmt: skip

    ids = [s.stage_id for s in campaign_of(rounds).recipes["afa"].stages()]
    assert (len(ids), ids[0], ids[-1]) == (max_rounds, first, last)


def test_rounds_elements_and_steady_state_settings():
    def rounds(raw):
        recipe(raw)["rounds"] = {
            "job": {"rw": "randrw", "iodepth": 16, "runtime": "2s"},
            "sweep": {"rwmixread": [100, 0], "bs": ["1m", "4k"]},
            "track": [{"element": "randrw_bs4k_qd16_mix0"},
                      {"element": "randrw_bs1m_qd16_mix100", "metric": "bw_bytes_s"}],
            "range": "15%",
            "slope": 0.05,
        }  # fmt: skip

    afa = campaign_of(rounds).recipes["afa"]
    spec = prepare_plan.recipe_spec(afa).to_dict()["rounds"]
    assert [element for element, _ in spec["elements"]] == [
        "randrw_bs1m_qd16_mix100",
        "randrw_bs4k_qd16_mix100",
        "randrw_bs1m_qd16_mix0",
        "randrw_bs4k_qd16_mix0",
    ]
    assert spec["elements"][3][1] == {
        "rw": "randrw", "iodepth": 16, "runtime": "2s", "rwmixread": 0, "bs": "4k"
    }  # fmt: skip
    assert spec["track"] == [
        {"element": "randrw_bs4k_qd16_mix0", "metric": "iops"},
        {"element": "randrw_bs1m_qd16_mix100", "metric": "bw_bytes_s"},
    ]
    assert (spec["window"], spec["max_rounds"]) == (5, 25)
    assert (spec["range_limit"], spec["slope_limit"]) == (0.15, 0.05)


def test_untracked_rounds_track_the_first_elements_iops():
    afa = campaign_of(
        lambda raw: recipe(raw).update(
            rounds={"job": {"rw": "randwrite", "runtime": "1s"}, "sweep": {"bs": ["4k", "64k"]}}
        )
    ).recipes["afa"]
    assert afa.rounds.track == ({"element": "randwrite_bs4k", "metric": "iops"},)
    assert (afa.rounds.range_limit, afa.rounds.slope_limit) == (0.2, 0.1)


def multi_host(raw):
    raw["hosts"]["clients"] = {"nodes": "client[1-3]", "transport": "ssh", "user": "root"}
    raw["targets"]["dev"]["capacity"] = "100MiB"
    recipe(raw)["target"] = "dev"
    for name in ("before", "after"):
        raw["experiments"][name].update(hosts="clients", target="dev")


def test_capacity_is_split_evenly_across_hosts_in_whole_mib():
    afa = campaign_of(multi_host).recipes["afa"]
    assert [h["name"] for h in afa.hosts] == ["client1", "client2", "client3"]
    assert afa.slice_bytes == 33 * MIB  # 100 MiB / 3 = 33.3 MiB, down to whole MiB
    # floor(0.85 * 33 MiB / 128 KiB) = floor(224.4) blocks
    assert afa.pass_bytes(afa.passes[0]) == 224 * 131072 == 29360128
    spec = prepare_plan.recipe_spec(afa).to_dict()
    assert (spec["capacity"], spec["slice_bytes"]) == (100 * MIB, 33 * MIB)


def test_recipe_hosts_are_the_experiments_hosts_in_config_order_or_its_own():
    def two_groups(raw):
        raw["hosts"]["clients"] = {"nodes": "client[1-2]", "transport": "ssh"}
        raw["experiments"]["before"]["hosts"] = "clients"
        raw["targets"]["scratch"]["capacity"] = "64MiB"

    afa = campaign_of(two_groups).recipes["afa"]
    assert [h["name"] for h in afa.hosts] == ["client1", "client2", "localhost"]
    assert afa.slice_bytes == 21 * MIB  # 64 MiB / 3 hosts

    def own_hosts(raw):
        two_groups(raw)
        recipe(raw)["hosts"] = "clients"

    assert [h["name"] for h in campaign_of(own_hosts).recipes["afa"].hosts] == [
        "client1",
        "client2",
    ]


def test_recipe_capacity_overrides_the_targets():
    afa = campaign_of(lambda raw: recipe(raw).update(capacity="32MiB")).recipes["afa"]
    assert (afa.capacity, afa.slice_bytes) == (32 * MIB, 32 * MIB)


def test_flush_specs():
    afa = campaign_of().recipes["afa"]
    assert afa.flush == {"method": "wait", "wait_s": 10.0}

    def polled(raw):
        recipe(raw)["flush"] = {"command": "array-cache", "done": r"dirty\s+0\b"}

    assert campaign_of(polled).recipes["afa"].flush == {
        "method": "command",
        "command": "array-cache",
        "host": "localhost",
        "done": r"dirty\s+0\b",
        "poll_s": 10.0,
        "timeout_s": 3600.0,
    }


def test_the_recipe_digest_follows_the_recipe_and_the_capacity():
    same = campaign_of().recipes["afa"].sha256
    assert campaign_of().recipes["afa"].sha256 == same
    changed_pass = campaign_of(lambda raw: recipe(raw)["passes"][0].update(fraction="80%"))
    changed_capacity = campaign_of(lambda raw: raw["targets"]["scratch"].update(capacity="1GiB"))
    assert changed_pass.recipes["afa"].sha256 != same
    assert changed_capacity.recipes["afa"].sha256 != same


def test_time_limits_stay_out_of_what_a_preparation_is():
    """A recipe's timeout and its flush's poll and timeout, and a dataset's timeout, reach the
    steps beside the specs: the digest and every spec are those of the recipe without them."""

    def polled(raw):
        recipe(raw)["flush"] = {"command": "array-cache", "done": "dirty=0"}

    def limited(raw):
        polled(raw)
        recipe(raw)["timeout"] = "6h"
        recipe(raw)["flush"].update(poll="1m", timeout="3h")
        raw["datasets"]["d"]["timeout"] = "2h"

    plain, timed = campaign_of(polled), campaign_of(limited)
    afa, timed_afa = plain.recipes["afa"], timed.recipes["afa"]
    assert timed_afa.sha256 == afa.sha256
    stage = afa.stages()[0]
    spec = prepare_plan.stage_spec(timed_afa, stage)
    assert spec == prepare_plan.stage_spec(afa, stage)
    assert spec.recipe.timeout_s is None and spec.recipe.flush["timeout_s"] == 3600.0
    assert prepare_plan.dataset_spec(timed.datasets["d"]) == prepare_plan.dataset_spec(
        plain.datasets["d"]
    )
    limits = prepare_plan.limits(timed_afa)
    assert limits == {"timeout_s": 6 * 3600.0, "flush_poll_s": 60.0, "flush_timeout_s": 3 * 3600.0}
    assert prepare_plan.limits(timed.datasets["d"]) == {"timeout_s": 2 * 3600.0}
    applied = prepare_plan.with_limits(json.loads(plan_specs.to_json(spec)), limits)
    assert applied["recipe"]["timeout_s"] == 6 * 3600.0
    assert applied["recipe"]["flush"]["poll_s"] == 60.0
    assert applied["recipe"]["flush"]["timeout_s"] == 3 * 3600.0
    # the configured limits are what the steps then run under
    assert StageSpec.from_dict(applied).recipe.timeout_s == 6 * 3600.0


@pytest.mark.parametrize(
    ("text", "fraction"),
    [("85%", 0.85), (0.85, 0.85), ("0.85", 0.85), ("1%", 0.01), ("100%", 1.0)],
)
def test_percentages(text, fraction):
    assert units.parse_percent(text) == pytest.approx(fraction)


@pytest.mark.parametrize("ambiguous", [1, 85, "100"])
def test_a_bare_number_of_one_or_more_is_ambiguous(ambiguous):
    # is 1 a whole pass or 1 %? The plan's '1 % aging' written as 1 would fill everything
    with pytest.raises(units.UnitError, match="ambiguous; write a percentage"):
        units.parse_percent(ambiguous)


# --- experiments on prepared targets ----------------------------------------------------------


def test_a_dataset_experiment_gets_the_dataset_layout():
    campaign = campaign_of()
    assert campaign.experiments["on_dataset"].job == {
        "size": "16MiB",
        "nrfiles": 2,
        "numjobs": 2,
        "filename_format": "d.$jobnum.$filenum",
        **RUN,
    }
    assert campaign.datasets["d"].layout_options()["filename_format"] == "d.$jobnum.$filenum"


def test_a_dataset_experiment_may_use_fewer_jobs_than_laid_out():
    campaign = campaign_of(lambda raw: raw["experiments"]["on_dataset"]["job"].update(numjobs=1))
    assert campaign.experiments["on_dataset"].job["numjobs"] == 1


def test_an_experiment_on_a_preconditioned_directory_uses_its_region_file():
    job = campaign_of().experiments["after"].job
    assert job == {"filename": "storbench-region", "size": 64 * MIB, **RUN}


def test_an_experiment_on_a_preconditioned_device_uses_the_device():
    def on_device(raw):
        recipe(raw)["target"] = "dev"
        for name in ("before", "after"):
            raw["experiments"][name]["target"] = "dev"

    assert campaign_of(on_device).experiments["after"].job == RUN


def test_state_labels_and_flush_phases():
    def combined(raw):
        raw["experiments"]["both"] = {
            "tool": "fio",
            "hosts": "localhost",
            "target": "scratch",
            "dataset": "d",
            "precondition": "afa",
            "job": dict(RUN),
        }
        raw["preconditioning"]["plain"] = {
            "target": "scratch",
            "passes": [{"name": "fill", "fraction": "100%", "bs": "1m"}],
        }
        raw["experiments"]["unflushed"] = {"tool": "fio", "hosts": "localhost",
                                           "target": "scratch", "precondition": "plain",
                                           "job": dict(RUN)}  # fmt: skip

    experiments = campaign_of(combined).experiments
    labels = {name: (e.prep_state, e.flush_phase) for name, e in experiments.items()}
    assert labels == {
        "on_dataset": ("dataset d", None),
        "before": ("afa, before flush", "before"),
        "after": ("afa, after flush", "after"),
        "both": ("dataset d; afa, after flush", "after"),
        "unflushed": ("plain", None),
    }


# --- problems --------------------------------------------------------------------------------


def rounds_of(**extra):
    return {"job": {"rw": "randwrite", "runtime": "1s"}, "sweep": {"bs": ["4k", "64k"]}, **extra}


PROBLEMS = {
    "unknown dataset": (
        lambda raw: raw["experiments"]["on_dataset"].update(dataset="nope"),
        "experiments.on_dataset.dataset: unknown dataset 'nope'",
    ),
    "unknown recipe": (
        lambda raw: raw["experiments"]["after"].update(precondition="nope"),
        "experiments.after.precondition: unknown recipe 'nope' (defined: afa)",
    ),
    "dataset on a block target": (
        lambda raw: raw["datasets"]["d"].update(target="dev"),
        "datasets.d.target: a dataset lays out files in a directory target, 'dev' is block",
    ),
    "recipe without capacity": (
        lambda raw: raw["targets"]["scratch"].pop("capacity"),
        "preconditioning.afa.capacity: needs a capacity (here or on the target)",
    ),
    "fraction above 100 %": (
        lambda raw: recipe(raw)["passes"][0].update(fraction="185%"),
        "preconditioning.afa.passes[0].fraction: '185%' is not between 0 and 100 %",
    ),
    "fraction not a number": (
        lambda raw: recipe(raw)["passes"][0].update(fraction="most"),
        "preconditioning.afa.passes[0].fraction: not a percentage: 'most' (e.g. 85%)",
    ),
    "duplicate pass names": (
        lambda raw: recipe(raw)["passes"].append({"name": "fill", "fraction": "5%", "bs": "4k"}),
        "preconditioning.afa.passes: pass name 'fill' is used twice",
    ),
    "pass named like the wipc": (
        lambda raw: recipe(raw).update(
            wipc={}, passes=[{"name": "wipc", "fraction": "5%", "bs": "4k"}]
        ),
        "preconditioning.afa.passes: pass name 'wipc' is used twice",
    ),
    "track element that does not exist": (
        lambda raw: recipe(raw).update(rounds=rounds_of(track=[{"element": "randwrite_bs8k"}])),
        "preconditioning.afa.rounds.track[0].element: no element 'randwrite_bs8k' "
        "(elements: randwrite_bs4k, randwrite_bs64k)",
    ),
    "max_rounds below the window": (
        lambda raw: recipe(raw).update(rounds=rounds_of(max_rounds=3)),
        "preconditioning.afa.rounds.max_rounds: 3 is fewer than the window (5)",
    ),
    "round without runtime": (
        lambda raw: recipe(raw).update(rounds={"job": {"rw": "randwrite"}}),
        "preconditioning.afa.rounds.job.runtime: a round element runs for a fixed time (e.g. 60s)",
    ),
    "flush on an experiment whose recipe has none": (
        lambda raw: recipe(raw).pop("flush"),
        "experiments.before.flush: recipe 'afa' has no flush",
    ),
    "flush without a recipe": (
        lambda raw: raw["experiments"]["on_dataset"].update(flush="before"),
        "experiments.on_dataset.flush: only with a precondition recipe",
    ),
    "experiment numjobs above the dataset's": (
        lambda raw: raw["experiments"]["on_dataset"]["job"].update(numjobs=4),
        "experiments.on_dataset: numjobs 4 needs files that dataset 'd' lays out for 2 job(s); "
        "raise its numjobs",
    ),
    "swept numjobs above the dataset's": (
        lambda raw: raw["experiments"]["on_dataset"].update(sweep={"numjobs": [1, 2, 3]}),
        "experiments.on_dataset: numjobs 3 needs files that dataset 'd' lays out for 2 job(s); "
        "raise its numjobs",
    ),
    "dataset size differs from the experiment's": (
        lambda raw: raw["experiments"]["on_dataset"]["job"].update(size="8MiB"),
        "experiments.on_dataset.job.size: '8MiB' differs from dataset 'd' ('16MiB'); leave it out",
    ),
    "recipe job sets numjobs": (
        lambda raw: recipe(raw)["job"].update(numjobs=4),
        "preconditioning.afa.job.numjobs: set per pass or in rounds.job, not for all",
    ),
    "recipe job sets bs": (
        lambda raw: recipe(raw)["job"].update(bs="4k"),
        "preconditioning.afa.job.bs: set per pass or in rounds.job, not for all",
    ),
    "non-fio tool with a dataset": (
        lambda raw: raw["experiments"]["on_dataset"].update(tool="elbencho"),
        "experiments.on_dataset.dataset: datasets are laid out in files only fio experiments "
        "read; write the data with elbencho in an experiment of its own and start this one "
        "after it (after:), which keeps its runs as the cached preparation",
    ),
    "flush host not among the recipe's hosts": (
        lambda raw: recipe(raw).update(flush={"command": "true", "host": "array-admin"}),
        "preconditioning.afa.flush.host: 'array-admin' is not one of the recipe's hosts "
        "(localhost)",
    ),
    "interval below 1s": (
        lambda raw: recipe(raw).update(interval="500ms"),
        "preconditioning.afa.interval: fio reports whole seconds, at least 1s",
    ),
    "interval not whole seconds": (
        lambda raw: recipe(raw).update(interval="1.5s"),
        "preconditioning.afa.interval: fio reports whole seconds, at least 1s",
    ),
    "chunk below 1MiB": (
        lambda raw: recipe(raw).update(chunk="512k"),
        "preconditioning.afa.chunk: at least 1MiB",
    ),
    "recipe with nothing to do": (
        lambda raw: (recipe(raw).update(passes=[]), recipe(raw).pop("flush", None)),
        "preconditioning.afa: nothing to do (give passes, wipc, rounds, purge or flush)",
    ),
    "recipe on S3": (
        lambda raw: (
            raw["targets"].update(
                s3={
                    "type": "s3",
                    "endpoint": "http://127.0.0.1:9000",
                    "bucket_prefix": "sb",
                    "credentials": {"access_key_env": "A", "secret_key_env": "B"},
                }
            ),
            recipe(raw).update(target="s3"),
        ),  # fmt: skip
        "preconditioning.afa.target: preconditioning writes a device or files, not S3",
    ),
    "recipe nobody uses": (
        lambda raw: raw["preconditioning"].update(
            spare={
                "target": "scratch",
                "passes": [{"name": "fill", "fraction": "100%", "bs": "1m"}],
            }
        ),
        "preconditioning.spare: no experiment names it and it has no 'hosts'",
    ),
    "dataset without a size": (
        lambda raw: raw["datasets"]["d"].update(job={"nrfiles": 2}),
        "datasets.d.job: needs size (per job) or filesize",
    ),
    "dataset sets rw": (
        lambda raw: raw["datasets"]["d"]["job"].update(rw="write"),
        "datasets.d.job.rw: storbench sets it for a dataset",
    ),
    "recipe for another target": (
        lambda raw: raw["experiments"]["after"].update(target="dev"),
        "experiments.after.precondition: recipe 'afa' is for target 'scratch', "
        "the experiment runs on 'dev'",
    ),
}


@pytest.mark.parametrize("case", PROBLEMS, ids=str)
def test_a_bad_preparation_names_its_key(case):
    mutate, expected = PROBLEMS[case]
    assert expected in problems_of(mutate)


# Gaps found in review, fixed: each test shows the case.


def test_an_interval_of_zero_is_rejected():
    assert "preconditioning.afa.interval: fio reports whole seconds, at least 1s" in problems_of(
        lambda raw: recipe(raw).update(interval=0)
    )


def test_zipped_numjobs_above_the_datasets_is_rejected():
    def zipped(raw):
        raw["experiments"]["on_dataset"]["sweep"] = {"zip": {"numjobs": [1, 4], "bs": ["4k", "8k"]}}

    assert (
        "experiments.on_dataset: numjobs 4 needs files that dataset 'd' lays out for 2 job(s); "
        "raise its numjobs"
    ) in problems_of(zipped)


def test_the_datasets_size_in_other_units_is_no_conflict():
    campaign = campaign_of(lambda raw: raw["experiments"]["on_dataset"]["job"].update(size="16M"))
    assert campaign.experiments["on_dataset"].job["size"] == "16M"


def test_a_swept_size_other_than_the_datasets_is_rejected():
    problems = problems_of(
        lambda raw: raw["experiments"]["on_dataset"].update(sweep={"size": ["8MiB", "16MiB"]})
    )
    assert any(p.startswith("experiments.on_dataset.sweep.size") for p in problems), problems


def test_an_unused_recipe_is_reported_next_to_other_problems():
    def two_problems(raw):
        raw["datasets"]["d"]["target"] = "nope"
        PROBLEMS["recipe nobody uses"][0](raw)

    assert "preconditioning.spare: no experiment names it and it has no 'hosts'" in problems_of(
        two_problems
    )


# --- paths ----------------------------------------------------------------------------------


def test_tokens_live_in_the_hosts_directory_of_a_directory_target():
    campaign = campaign_of()
    assert prepare_plan.recipe_spec(campaign.recipes["afa"]).to_dict()["tokens"] == {
        "localhost": "/var/tmp/sb/localhost/.storbench/precondition-afa.json"
    }
    assert prepare_plan.dataset_spec(campaign.datasets["d"]).to_dict()["tokens"] == {
        "localhost": "/var/tmp/sb/localhost/.storbench/dataset-d.json"
    }
    shared = {"name": "scratch", "type": "directory", "path": "/mnt/nfs/", "per_host_subdir": False}
    assert (
        prepare_plan.token_path(shared, {"name": "c1"}, "dataset", "d")
        == "/mnt/nfs/.storbench/dataset-d.json"
    )


def test_tokens_of_a_device_live_in_the_hosts_workdir():
    campaign = campaign_of(multi_host)
    assert prepare_plan.recipe_spec(campaign.recipes["afa"]).to_dict()["tokens"] == {
        f"client{i}": "/tmp/storbench/state/dev/precondition-afa.json" for i in (1, 2, 3)
    }
    device = {"name": "dev", "type": "block", "path": "/dev/nvme0n1"}
    assert (
        prepare_plan.token_path(device, {"name": "c1", "workdir": "/scratch/sb/"}, "precondition",
                                "afa")
        == "/scratch/sb/state/dev/precondition-afa.json"
    )  # fmt: skip


def test_marker_paths():
    afa = campaign_of().recipes["afa"]
    assert prepare_plan.stage_marker(afa, "p1-fill-r1") == (
        "results/targets/scratch/precondition/afa/stages/p1-fill-r1.json"
    )
    assert (
        prepare_plan.prepared_marker(afa)
        == "results/targets/scratch/precondition/afa/prepared.json"
    )
    assert (
        prepare_plan.flushed_marker(afa) == "results/targets/scratch/precondition/afa/flushed.json"
    )
    assert prepare_plan.report_dir(afa) == "reports/targets/scratch/afa"
    assert prepare_plan.dataset_marker(campaign_of().datasets["d"]) == (
        "results/targets/scratch/datasets/d.json"
    )
