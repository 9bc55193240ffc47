"""The ClusterShell transport's own parts that need no gateway (the rest runs through a real
one: tests/workflow/test_tree_connection.py and the transport tests of test_hosts.py)."""

import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

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


def test_ssh_on_every_hop_keeps_its_sockets_in_a_folder_of_its_own(tmp_path):
    """The persistent connections' sockets: a folder someone else could write to would let
    them plant a socket that receives our sessions."""
    from storbench.hosts.tree import SSH_PATH

    uid = f"99{os.getpid()}"
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "id").write_text(f'#!/bin/sh\n[ "$1" = -u ] && echo {uid} || echo someone\n')
    (fake / "id").chmod(0o755)
    folder = Path(f"/tmp/storbench-ssh-{uid}")
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    try:
        folder.mkdir(mode=0o755)
        folder.chmod(0o755)
        refused = subprocess.run([*shlex.split(SSH_PATH), "-V"], env=env, capture_output=True,
                                 text=True)  # fmt: skip
        assert (refused.returncode, refused.stderr) == (
            255,
            f"ssh: {folder} must belong to someone alone (mode 0700)\n",
        )
        folder.rmdir()  # made by ssh's wrapper itself: private
        done = subprocess.run([*shlex.split(SSH_PATH), "-V"], env=env, capture_output=True,
                              text=True)  # fmt: skip
        assert done.returncode == 0 and done.stderr.startswith("OpenSSH_")
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    finally:
        if folder.exists():
            folder.rmdir()
