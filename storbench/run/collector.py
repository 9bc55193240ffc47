"""Python's cyclic garbage collector in Snakemake's process: sparse while the campaign's DAG
is built, then back to its defaults with the DAG out of its reach.

Planning creates millions of objects that live as long as the process (jobs, their files and
params, the DAG). With the default thresholds the collector scans them again and again as
they grow: 18 full passes and 650 middle ones over a 10,000-run dry run, a sixth to a
quarter of its time (`python bench/planning.py`). Nothing of the DAG becomes garbage before
the campaign ends, so once it is built it goes to the permanent generation (gc.freeze) and
the campaign's own collections, in the scheduler's thread, skip it.
"""

from __future__ import annotations

import gc

# A young generation of 100,000 objects (a few MB of garbage at most): what planning creates
# is collected rarely, and still collected if the campaign's start never comes (--no-hooks).
PLANNING_THRESHOLDS = (100_000, 50, 100)
DEFAULT_THRESHOLDS = gc.get_threshold()


def collect_sparsely_while_planning() -> None:
    """The Snakefile calls this before the campaign is read and its DAG built."""
    gc.set_threshold(*PLANNING_THRESHOLDS)


def collect_as_usual_from_the_start() -> None:
    """The campaign's start (onstart) calls this: planning's garbage collected once (frozen,
    it would never be), what is left frozen, the default thresholds back."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*DEFAULT_THRESHOLDS)
