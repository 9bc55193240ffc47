"""Open files a step on many hosts holds in this controller process, and the limit on them.

Each host a step works on at once holds a few files here (an ssh client's pipes, a paramiko
socket and its channel's pipe), and the tools started from here (a `fio --client` reaching
every host's service) inherit the limit. A standalone run on 48 loopback hosts peaked at 148
open files over persistent connections and 244 over paramiko's: a login's usual soft limit of
1,024 would run out at about 340 or 200 hosts. The soft limit is raised towards the hard one
as far as a step needs; a hard limit too low is named before any host is touched.
"""

from __future__ import annotations

import resource

FILES_PER_HOST = 8  # measured: 3 (OpenSSH) to 5 (paramiko) per host in a standalone run
RESERVE = 256  # this process's own: Python, its libraries, logs, the Snakemake job's files
LIMIT = resource.RLIMIT_NOFILE


class OpenFilesError(RuntimeError):
    pass


def needed_for(hosts: int) -> int:
    return RESERVE + FILES_PER_HOST * hosts


def allow_for(hosts: int, *, in_turns: bool = False) -> int:
    """Raise this process's soft open-files limit to what ``hosts`` hosts at once need (never
    lower it); the soft limit now. OpenFilesError when the hard limit is below the need;
    in_turns: the step takes its hosts STORBENCH_FANOUT at a time (a run starts all at once)."""
    needed = needed_for(hosts)
    soft, hard = resource.getrlimit(LIMIT)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return soft
    if hard != resource.RLIM_INFINITY and hard < needed:
        fits = max(1, (hard - RESERVE) // FILES_PER_HOST)
        fewer = (
            f", or take at most {fits} hosts at a time (STORBENCH_FANOUT={fits})"
            if in_turns
            else " (a run starts all its hosts together)"
        )
        raise OpenFilesError(
            f"{hosts} hosts at once need about {needed} open files in this process, and its"
            f" hard limit is {hard} (`ulimit -Hn`): raise it (`nofile` in"
            f" /etc/security/limits.conf, LimitNOFILE= of a systemd unit){fewer}"
        )
    resource.setrlimit(LIMIT, (needed, hard))
    return needed
