"""`snakemake plan` and schedule files: what would run, shown without touching any host."""

from tests.workflow.test_workflow import snakemake

SCHEDULE = """\
# two workloads in the scale-test guide's schedule format
--rw=randread --numjobs=16 --iodepth=8 --bs=1024k --size=30g --runtime=300 --ramp_time=60
--rw=write --numjobs=4 --iodepth=1 --bs=4k --size=1g --runtime=60
"""


def unreachable_config(tmp_path) -> dict:
    """Hosts nobody listens on: the plan must not need them."""
    hosts = {
        f"c{i}": {"transport": "ssh", "nodes": f"127.0.0.{200 + i}", "port": 1, "workdir": "/w"}
        for i in (1, 2)
    }
    (tmp_path / "bw.sch").write_text(SCHEDULE)
    return {
        "hosts": hosts,
        "targets": {"scratch": {"type": "directory", "path": "/mnt/nfs"}},
        "experiments": {
            "scale": {
                "tool": "fio",
                "hosts": ["c1", "c2"],
                "target": "scratch",
                "execution": "service",
                "steps": {"mode": "constant", "size": 1},
                "job": {"ioengine": "libaio", "direct": 1},
                "schedule": "bw.sch",
            },
        },
    }


def test_plan_prints_commands_and_job_files_without_touching_hosts(tmp_path):
    result = snakemake(tmp_path, unreachable_config(tmp_path), "plan")
    text = (tmp_path / "results/logs/plan.log").read_text()
    assert "fio --server=ip:127.0.0.201,8765" in text
    # schedule workloads named as the guide names them, one run per host (constant steps)
    assert "-- run rd_rnd_qd_128_1024k_16w_host-127.0.0.201 (step host-127.0.0.201)" in text
    assert "-- run wr_qd_4_4k_4w_host-127.0.0.202 (step host-127.0.0.202)" in text
    assert (
        "controller: fio --output-format=json+ "
        "'--output=results/scale/raw/rd_rnd_qd_128_1024k_16w_host-127.0.0.202/it<k>/a<n>/"
        "controller.json' --client=ip:127.0.0.202,8765 "
        "results/scale/jobs/rd_rnd_qd_128_1024k_16w_host-127.0.0.202/127.0.0.202.fio"
    ) in text
    assert "     | directory=/mnt/nfs/127.0.0.202" in text
    assert "     | bs=1m" in text and "     | numjobs=16" in text
    assert not (tmp_path / "results/services").exists()
    assert "services stopped" not in result.stdout + result.stderr


def test_schedule_errors_name_the_file_and_line(tmp_path):
    config = unreachable_config(tmp_path)
    (tmp_path / "bw.sch").write_text("--rw=randread --bs=4kk --numjobs=1 --iodepth=1\n")
    result = snakemake(tmp_path, config, "plan", check=False)
    assert result.returncode != 0
    assert "experiments.scale.schedule" in result.stderr and "bw.sch:1" in result.stderr


def test_plan_shows_a_data_address_made_from_the_hosts_numbers(tmp_path):
    """'{n}' in a config is no wildcard of the plan rule (scale-test.yaml, virtuozzo.yaml)."""
    config = unreachable_config(tmp_path)
    for group in config["hosts"].values():
        group["data_address"] = "192.168.100.{n}"
    snakemake(tmp_path, config, "plan")
    text = (tmp_path / "results/logs/plan.log").read_text()
    assert "fio --server=ip:192.168.100.1,8765" in text
