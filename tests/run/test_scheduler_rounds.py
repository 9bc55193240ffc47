from storbench.run.scheduler_rounds import first_few_of_each_kind


def test_the_first_few_of_each_kind_in_order():
    # (kind, order): renders 0..9, runs on two targets 10..19
    jobs = [("render", n) for n in range(10)]
    jobs += [("run a" if n % 2 else "run b", n) for n in range(10, 20)]
    chosen = first_few_of_each_kind(reversed(jobs), lambda j: j[0], lambda j: j[1], 3)
    assert sorted(chosen, key=lambda j: j[1]) == [
        ("render", 0), ("render", 1), ("render", 2),
        ("run b", 10), ("run a", 11), ("run b", 12), ("run a", 13), ("run b", 14), ("run a", 15),
    ]  # fmt: skip


def test_a_kind_with_fewer_jobs_keeps_them_all():
    jobs = [("preflight", 7), ("render", 1), ("render", 2)]
    chosen = first_few_of_each_kind(jobs, lambda j: j[0], lambda j: j[1], 20)
    assert sorted(chosen) == sorted(jobs)
