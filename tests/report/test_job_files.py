"""The job files appendix: a run's host job files shown once per distinct text."""

from storbench.report.job_files import HOST_PLACEHOLDER, sections


def host_job(host: str, numjobs: int = 1) -> str:
    return (
        f"; storbench experiment scale, run read_bs4k\n[global]\n"
        f"directory=/data/scratch/{host}\n\n[read_bs4k]\nrw=read\nnumjobs={numjobs}\n"
    )


def test_hosts_sharing_a_job_but_their_name_get_one_listing():
    hosts = [f"127.0.1.{i}" for i in (1, 2, 10, 11)]
    listed = sections({f"read_bs4k/{host}": host_job(host) for host in hosts})
    assert listed == [
        {
            "run": "read_bs4k",
            "hosts": sorted(hosts),
            "text": host_job(HOST_PLACEHOLDER),
        }
    ]


def test_a_host_whose_job_differs_otherwise_is_listed_apart_with_its_own_text():
    jobs = {f"read_bs4k/{host}": host_job(host) for host in ("c1", "c2", "c3")}
    jobs["read_bs4k/c4"] = host_job("c4", numjobs=8)  # its numjobs from its facts
    jobs["write_bs4k"] = "[write_bs4k]\nrw=write\n"  # a run's one job file
    listed = sections(jobs)
    assert [(s["run"], s["hosts"]) for s in listed] == [
        ("read_bs4k", ["c1", "c2", "c3"]),
        ("read_bs4k", ["c4"]),
        ("write_bs4k", []),
    ]
    assert listed[1]["text"] == host_job("c4", numjobs=8)
    assert listed[2]["text"] == "[write_bs4k]\nrw=write\n"


def test_a_name_inside_another_word_or_address_stays():
    # 127.0.1.1 is a prefix of 127.0.1.10's address; c1 is inside "c10"
    jobs = {
        "r/127.0.1.1": "directory=/d/127.0.1.1\n; peer 127.0.1.10\n",
        "r/127.0.1.2": "directory=/d/127.0.1.2\n; peer 127.0.1.10\n",
    }
    (shared,) = sections(jobs)
    assert shared["text"] == f"directory=/d/{HOST_PLACEHOLDER}\n; peer 127.0.1.10\n"
