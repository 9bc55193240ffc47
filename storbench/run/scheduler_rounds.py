"""Each round of Snakemake's scheduler weighs the first few ready jobs of each kind, not all.

After every job's end, Snakemake's scheduler takes every job ready to run through its
selection: each one's inputs looked up on disk, its resources evaluated again, the greedy
knapsack over all of them. In a campaign every run waiting for its target is ready, and so is
every job file not yet rendered, so a round grew with the campaign (`python
bench/scheduler_rounds.py`: 10 ms per job at 250 runs, 26 ms at 2,000). Jobs of one kind (the
same rule, priority and hold on each target's lock) ask for the same resources: a round needs
only the first few of each, in Snakemake's order of them (the DAG's, a sweep's order). With
more than ``round_limit`` jobs ready the selection sees the first ``kind_limit`` of each
kind; the next round sees the next ones. Snakemake's own ``--scheduler-subsample`` draws at
random instead, and may leave out the one job of a kind that matters (a preflight, the next
run of a free target).
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterable

ROUND_LIMIT = 200
KIND_LIMIT = 20


def first_few_of_each_kind(jobs: Iterable, kind: Callable, order: Callable, limit: int) -> list:
    """The first ``limit`` jobs by ``order`` of each ``kind``."""
    kinds = defaultdict(list)
    for job in jobs:
        kinds[kind(job)].append(job)
    return [job for same in kinds.values() for job in heapq.nsmallest(limit, same, key=order)]


def weigh_a_few_of_each_kind(
    workflow, kind: Callable, round_limit: int = ROUND_LIMIT, kind_limit: int = KIND_LIMIT
) -> bool:
    """Wrap the job selection of a local campaign's scheduler; True if it did. ``kind`` of a
    job: what it needs from the scheduler (rules/common.smk: its rule, priority and the
    targets whose lock it holds). The campaign's start (onstart) calls this."""
    scheduler = getattr(workflow, "scheduler", None)
    if not getattr(workflow, "local_exec", False) or scheduler is None:
        return False
    select = scheduler.job_selector
    dag = workflow.dag

    def kind_of(job) -> object:
        return ("group", id(job)) if job.is_group() else kind(job)

    def select_among_the_first_few(jobs):
        if len(jobs) > round_limit:
            jobs = first_few_of_each_kind(jobs, kind_of, dag.jobid, kind_limit)
        return select(jobs)

    scheduler.job_selector = select_among_the_first_few
    return True
