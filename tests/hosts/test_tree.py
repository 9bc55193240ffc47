"""The ClusterShell transport's own parts that need no gateway (the rest runs through a real
one: tests/workflow/test_tree_connection.py and the transport tests of test_hosts.py)."""

import subprocess
import sys

from tests.paths import REPO

SEVERAL_GATEWAYS_AT_ONCE = """
import threading
from storbench.hosts import tree

failures = []

def start(index):
    try:
        tree._Generation(f"gw{index}", frozenset({f"host{index}"}), "-oBatchMode=yes")
    except Exception as error:
        failures.append(repr(error))

threads = [threading.Thread(target=start, args=(index,)) for index in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join(30)
print(sum(thread.is_alive() for thread in threads), failures)
"""


def test_tasks_for_several_gateways_start_together_in_a_new_process():
    """A step on hosts behind two gateways starts both tasks at once, first thing in its
    process: ClusterShell's first load of its SSH worker is not safe for threads (one in three
    such processes failed with 'partially initialized module ClusterShell.Worker.Ssh')."""
    for _ in range(10):  # each a fresh process: only the first load races
        done = subprocess.run(
            [sys.executable, "-c", SEVERAL_GATEWAYS_AT_ONCE], cwd=REPO, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
        assert (done.returncode, done.stdout) == (0, "0 []\n"), done.stderr
