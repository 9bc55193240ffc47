"""The examples that claim a reference plan's workloads run exactly those workloads."""

from pathlib import Path

import pytest

from storbench.config import campaign as config

REPO = Path(__file__).resolve().parents[2]

# The IDC AFA tutorial's four baseline .cfg files (4kb_20_80_seq, 8kb_65_35_ran,
# 64kb_65_35_ran, 128kb_80_20_seq): pattern, xfersize, rdpct, forthreads.
IDC_BASELINE = [("rw", "4k", 20, 32), ("randrw", "8k", 65, 16), ("randrw", "64k", 65, 8),
                ("rw", "128k", 80, 4)]  # fmt: skip


@pytest.mark.parametrize(
    ("example", "experiment"),
    [
        ("soak.yaml", "soak"),
        ("afa-precondition.yaml", "baseline"),
        ("vdbench-afa-baseline.yaml", "afa_baseline"),
        ("idc-vdbench-multihost.yaml", "afa_baseline_multihost"),
    ],
)
def test_examples_run_the_idc_plans_four_baseline_workloads(example, experiment):
    loaded = config.load_campaign_file(REPO / "config/examples" / example)
    runs = loaded.experiment_runs(experiment)
    workloads = [
        (run.params["rw"], run.params["bs"], run.params.get("rwmixread"), run.params["iodepth"])
        for run in runs
    ]
    assert workloads == IDC_BASELINE


def test_elastifile_searches_answer_each_column_of_the_notes_iops_table():
    """'Maximum sustained IOPS (under 2ms)': Read, Write and Mixed 70/30, 4k or 8k blocks."""
    loaded = config.load_campaign_file(REPO / "config/examples/elastifile.yaml")
    under_2ms = sorted(
        (experiment.job["rw"], experiment.job.get("rwmixread"), experiment.job["bs"])
        for experiment in loaded.experiments.values()
        if experiment.search
        and experiment.search["objective"]["metric"] == "iops"
        and experiment.search["objective"]["limit_ns"] == 2_000_000
    )
    assert under_2ms == [("randread", None, "4k"), ("randrw", 70, "4k"), ("randwrite", None, "4k")]


def test_virtuozzo_runs_the_replication_scripts_in_the_folder_its_step_sets_up():
    """'Testing the desired replication settings': set-attr on /mnt/vstorage/test, then on
    any node storage_test.sh with fio.read.random, .write.random, .read.seq, .write.seq."""
    loaded = config.load_campaign_file(REPO / "config/examples/virtuozzo.yaml")
    folder = "/mnt/vstorage/test"
    assert f"set-attr -R {folder} replicas=3:2" in loaded.raw["setup"]["replication"]["command"]
    in_folder = [
        name
        for name, experiment in loaded.experiments.items()
        if experiment.target == {"type": "directory", "path": folder}
    ]
    assert in_folder == ["replicated_fio"]
    experiment = loaded.experiments["replicated_fio"]
    assert (experiment.setup, experiment.ordered) == (("replication",), True)
    runs = loaded.experiment_runs("replicated_fio")
    assert {run.hosts for run in runs} == {("vhi1",)}
    scripts = [
        {k: run.params[k] for k in ("rw", "bs", "iodepth", "numjobs", "size", "fdatasync")}
        for run in runs
    ]
    assert scripts == [
        {"rw": rw, "bs": bs, "iodepth": depth, "numjobs": 16, "size": "8g", "fdatasync": 32}
        for rw, bs, depth in (("randread", "4k", 32), ("randwrite", "4k", 32), ("read", "1m", 16),
                              ("write", "1m", 16))
    ]  # fmt: skip


def test_scale_test_saturation_runs_are_averaged_over_three_and_wait_as_the_harness():
    """3.2: results "averaged across 3 separate runs"; 2.2.2 Table 8: 120 s between steps;
    2.3.2: several iperf3 streams on 100GbE."""
    loaded = config.load_campaign_file(REPO / "config/examples/scale-test.yaml")
    saturation = {
        name: (loaded.experiments[name].iterations, loaded.experiments[name].wait_s)
        for name in ("bw_100g", "bw_10g")
    }
    assert saturation == {"bw_100g": (3, 120), "bw_10g": (3, 120)}
    assert loaded.raw["network"]["parallel"]["clients100g"] > 1


def test_vast_elbencho_file_tests_use_the_guides_threads_and_iodepths():
    """Section 4: BW tests at "16 workers / 8 iodepth", sequential and random (Tables 11-13,
    5.4.2's rd-1024kbs-16t-8iodepth_rnd); Table 16: 4K random, 4 workers, iodepth 64 and 16."""
    loaded = config.load_campaign_file(REPO / "config/examples/vast-elbencho.yaml")

    def workloads(name: str) -> set:
        runs = loaded.experiment_runs(name)
        return {
            (r.params["rw"], r.params["bs"], r.params["numjobs"], r.params.get("iodepth"))
            for r in runs
        }

    assert workloads("elbencho_file_bw") == {("read", "1m", 16, 8), ("randread", "1m", 16, 8)}
    assert workloads("elbencho_file_iops") == {("randread", "4k", 4, 64), ("randread", "4k", 4, 16)}
