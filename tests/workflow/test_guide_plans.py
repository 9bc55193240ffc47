"""Each reference guide's shipped config, scaled down, runs for real on three lab hosts.

tests/workflow/guide_variants.py keeps each config's structure (order, waits, set-up steps,
datasets, recipes, searches, the guide's tables, network checks) and shrinks hosts,
targets, sizes and times; the parts whose tools are not installed here (elbencho, warp,
GOSBench, vdbench) are checked by `snakemake -n` in test_examples.py and by their captured
live outputs in tests/tools/.
"""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.sshd import SshLab, free_port
from tests.workflow.guide_variants import GROUP_ADDRESSES, LAB_ADDRESSES, scaled_down
from tests.workflow.test_workflow import snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.ssh]


@pytest.fixture(scope="module")
def guide_lab(tmp_path_factory):
    """Three sshd sharing one port (a host group's nodes share their port)."""
    lab = SshLab(tmp_path_factory.mktemp("guide-sshd"))
    port = free_port(LAB_ADDRESSES[0])
    try:
        for address in LAB_ADDRESSES:
            lab.start(address, port)
        yield {
            "port": port,
            "identity": str(lab.client_key),
            "known_hosts": str(lab.known_hosts),
        }
    finally:
        lab.stop_all()


def mounted(path: Path) -> bool:
    return subprocess.run(["mountpoint", "-q", str(path)]).returncode == 0


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def summary_rows(folder: Path, experiment: str) -> list[dict]:
    return pq.read_table(folder / "results" / experiment / "summary.parquet").to_pylist()


def table_rows(folder: Path, name: str) -> list[dict]:
    with open(folder / "reports" / "campaign" / "tables" / f"{name}.csv") as handle:
        return list(csv.DictReader(handle))


def run_guide(example: str, guide_lab, folder: Path) -> dict:
    config = scaled_down(example, guide_lab, folder)
    (folder / "scaled.yaml").write_text(yaml.safe_dump(config))
    snakemake(folder, config)
    return config


def test_wildfire_all_luns_together_with_the_reports_tables(guide_lab, tmp_path):
    config = run_guide("wildfire-luns.yaml", guide_lab, tmp_path)
    rows = [r for r in summary_rows(tmp_path, "ess_luns") if r["host"] == "all"]
    run_ids = {r["run_id"] for r in rows}
    assert len(run_ids) == 2 * 2 * 2  # bs x rw x iodepth, never a LUN alone
    assert all(r["run_id"].endswith("_t-all") for r in rows)
    targets = {r["target"] for r in summary_rows(tmp_path, "ess_luns")}
    assert {f"lun{i}" for i in range(8)} <= targets  # one section per LUN in every run
    table = {row["bs"]: row for row in table_rows(tmp_path, "randread")}
    assert set(table) == {"4k", "16k"}
    assert set(config["report"]["tables"]) == {"randread", "randrw", "randwrite"}
    for bs, row in table.items():
        for depth in (1, 2):
            (cell,) = [
                r
                for r in rows
                if r["rw"] == "randread"
                and r["iodepth"] == depth
                and r["bs"] == {"4k": 4096, "16k": 16384}[bs]
                and r["target"] == "+".join(f"lun{i}" for i in range(8))
            ]
            assert float(row[f"iodepth {depth} IOPS"]) == pytest.approx(cell["iops"], rel=1e-2)


def test_virtuozzo_mesh_setup_dataset_and_nfs_scripts(guide_lab, tmp_path):
    try:
        run_guide("virtuozzo.yaml", guide_lab, tmp_path)
        share = Path(
            yaml.safe_load((tmp_path / "scaled.yaml").read_text())["targets"]["nfs"]["path"]
        )
        for address in GROUP_ADDRESSES:
            assert mounted(share / address)  # the NFS mount step, made on each load generator
        assert (tmp_path / "once" / "replication" / "attributes").read_text() == "done\n"
        # prepare-set: numjobs = the host's cores, size = 2 x its RAM / its cores
        facts = read_json(tmp_path / f"results/telemetry/{GROUP_ADDRESSES[0]}.json")
        files = sorted((share / GROUP_ADDRESSES[0]).glob("prepare_set.*"))
        assert len(files) == facts["cores"]
        # the guide's first two scripts, in order, on the dataset's files
        rows = [r for r in summary_rows(tmp_path, "nfs_fio") if r["host"] == "all"]
        starts = {r["run_id"]: r["start_time"] for r in rows}
        assert list(starts) and min(starts, key=starts.get).startswith("randread")
        assert {r["prep_state"] for r in rows} == {"dataset prepare_set"}
        # the network section: every node serving and every node a client, each link alone
        snakemake(tmp_path, yaml.safe_load((tmp_path / "scaled.yaml").read_text()), "network")
        links = pq.read_table(tmp_path / "results/network/network.parquet").to_pylist()
        pairs = {(r["host"], r["target"]): r["bytes"] for r in links if r["run_id"] == "pairs"}
        a, b = GROUP_ADDRESSES
        assert set(pairs) == {(a, b), (b, a)} and min(pairs.values()) > 0
    finally:
        snakemake(tmp_path, yaml.safe_load((tmp_path / "scaled.yaml").read_text()), "cleanup")
    assert not mounted(share / GROUP_ADDRESSES[0])


def test_elastifile_sizing_rules_searches_and_per_node_table(guide_lab, tmp_path):
    config = run_guide("elastifile.yaml", guide_lab, tmp_path)
    storage = config["storage"]
    cores = storage["nodes"] * storage["cores"]  # 12: "clients = half", "files = cores"
    share = Path(config["targets"]["ecfs"]["path"])
    for address in GROUP_ADDRESSES:
        files = sorted((share / address).glob("working_set.*"))
        assert len(files) == cores // 2 // len(GROUP_ADDRESSES)  # one file per job
        # 3 x the cluster's memory (4 MiB per node here) over its half cores (the jobs)
        assert {f.stat().st_size for f in files} == {3 * 3 * 4 * 2**20 // (cores // 2)}
    searches = {
        "oltp_iops": "iops",
        "read_iops": "iops",
        "write_iops": "iops",
        "bw_64k": "bandwidth",
    }
    for experiment, metric in searches.items():
        answer = read_json(tmp_path / f"results/{experiment}/search.json")
        assert answer["objective"]["metric"] == metric
        assert answer["probes"], experiment
    rows = [r for r in summary_rows(tmp_path, "bw_sizes") if r["host"] == "all"]
    table = {row["bs"]: row for row in table_rows(tmp_path, "per_node_and_system")}
    for row in rows:
        (bs,) = [label for label, size in (("32k", 32768), ("64k", 65536)) if size == row["bs"]]
        op = row["rw"]
        system = float(table[bs][f"{op} GB/s"])
        assert system == pytest.approx(row["bw_bytes_s"] / 1e9, rel=2e-2, abs=2e-4)
        per_node = float(table[bs][f"{op} GB/s per node"])
        assert per_node == pytest.approx(
            row["bw_bytes_s"] / 1e9 / storage["nodes"], rel=2e-2, abs=2e-4
        )


def test_idc_afa_phases_in_order_before_and_after_the_flush(guide_lab, tmp_path):
    run_guide("afa-precondition.yaml", guide_lab, tmp_path)
    folder = tmp_path / "results/targets/afa_lun/precondition/afa"
    prepared = read_json(folder / "prepared.json")
    written = {p["name"]: p["bytes_written"] for p in prepared["passes"]}
    slice_bytes = 16 * 2**20
    assert written["precondition"] >= int(0.85 * slice_bytes) // 131072 * 131072
    assert set(written) == {"precondition", "conditioning", "aging"}
    flushed = read_json(folder / "flushed.json")
    before = summary_rows(tmp_path, "baseline_before_flush")
    after = summary_rows(tmp_path, "baseline")
    assert {r["prep_state"] for r in before} == {"afa, before flush"}
    assert {r["prep_state"] for r in after} == {"afa, after flush"}
    assert max(r["end_time"] for r in before) <= flushed["finished"]
    assert min(r["start_time"] for r in after) >= flushed["finished"]


def test_vast_client_steps_per_network_with_mounts_and_the_saturation_table(guide_lab, tmp_path):
    try:
        config = run_guide("scale-test.yaml", guide_lab, tmp_path)
        rows = [r for r in summary_rows(tmp_path, "bw_100g") if r["host"] == "all"]
        assert {r["hosts_in_run"] for r in rows} == {2}
        hosts = {r["host"] for r in summary_rows(tmp_path, "slow_clients")} - {"all"}
        assert hosts == set(GROUP_ADDRESSES)  # each 10GbE client alone
        table = table_rows(tmp_path, "saturation")
        assert [row["hosts"] for row in table] == ["2"]
        (bw_10g,) = [r for r in summary_rows(tmp_path, "bw_10g") if r["host"] == "all"]
        assert float(table[0]["10GbE GB/s"]) == pytest.approx(
            bw_10g["bw_bytes_s"] / 1e9, rel=2e-2, abs=2e-4
        )
        target = Path(config["targets"]["vast"]["path"])
        assert all(mounted(target / address) for address in GROUP_ADDRESSES)
    finally:
        snakemake(tmp_path, yaml.safe_load((tmp_path / "scaled.yaml").read_text()), "cleanup")
    assert not any(mounted(target / address) for address in GROUP_ADDRESSES)
