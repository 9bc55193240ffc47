"""The ClusterShell transport's own parts that need no gateway (the rest runs through a real
one: tests/workflow/test_tree_connection.py and the transport tests of test_hosts.py)."""

import os
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

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


NOBODY = 65534  # a user of its own for the sockets' folder (/tmp/storbench-ssh-65534)


def as_nobody(argv: list[str]) -> subprocess.CompletedProcess:
    switch = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    return subprocess.run([*switch, *argv], capture_output=True, text=True, timeout=30)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="runs ssh's wrapper as another user (root and setpriv)")  # fmt: skip
def test_ssh_on_every_hop_keeps_its_sockets_in_a_folder_of_its_own():
    """The persistent connections' sockets: a folder someone else could write to would let
    them plant a socket that receives our sessions."""
    from storbench.hosts.tree import SSH_PATH

    ssh_version = [*shlex.split(SSH_PATH), "-V"]
    folder = Path(f"/tmp/storbench-ssh-{NOBODY}")
    refusal = f"ssh: {folder} must belong to nobody alone (mode 0700)\n"
    shutil.rmtree(folder, ignore_errors=True)
    try:
        folder.mkdir(mode=0o755)  # someone else's (root's)
        (folder / ".private").touch()  # a mark there says nothing: the folder is not ours
        refused = as_nobody(ssh_version)
        assert (refused.returncode, refused.stderr) == (255, refusal)
        shutil.rmtree(folder)

        done = as_nobody(ssh_version)  # the wrapper makes it: private, and marked so
        assert done.returncode == 0 and done.stderr.startswith("OpenSSH_"), done.stderr
        assert (folder.stat().st_uid, stat.S_IMODE(folder.stat().st_mode)) == (NOBODY, 0o700)
        assert [p.name for p in folder.iterdir()] == [".private"]
        assert as_nobody(ssh_version).returncode == 0  # the builtins' check from now on

        (folder / ".private").unlink()  # ours but open to others, unmarked: checked in full
        folder.chmod(0o755)
        refused = as_nobody(ssh_version)
        assert (refused.returncode, refused.stderr) == (255, refusal)
        shutil.rmtree(folder)

        folder.symlink_to("/tmp")  # a link, wherever it points
        refused = as_nobody(ssh_version)
        assert (refused.returncode, refused.stderr) == (255, refusal)
    finally:
        if folder.is_symlink():
            folder.unlink()
        shutil.rmtree(folder, ignore_errors=True)


def test_closing_the_connections_of_a_gateway_that_cannot_be_reached_says_so():
    """`snakemake cleanup` reports what it closed: not hosts it could not reach."""
    from storbench.core.model import Host
    from storbench.hosts import tree

    spec = Host(name="client01", address="127.0.0.26", transport="ssh", port=1,
                connection="tree", gateway="127.0.0.25", connect_timeout=5)  # fmt: skip
    lines = tree.disconnect([spec])
    assert len(lines) == 2, lines
    assert lines[0].startswith("gateway 127.0.0.25: its connections to hosts not closed: ssh: ")
    assert "port 1: Connection refused" in lines[0]
    assert lines[1] == "gateway 127.0.0.25: persistent connection gone"
