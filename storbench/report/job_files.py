"""The job files appendix: a run's job file once, however many hosts ran it.

Service mode, host split and host facts give each host of a run its own job file
('<run>/<host>'), which differ mostly by the host's name (its own directory). Shown one by
one, 3 runs on 128 hosts made 384 listings and a 232-page PDF. A run's host job files are
shown once per distinct text with each host's name as HOST_PLACEHOLDER, and the hosts that
ran it listed; a host whose job differs otherwise (its numjobs from its facts, a read or
write role) gets its own listing.
"""

from __future__ import annotations

import re

HOST_PLACEHOLDER = "<host>"


def sections(job_files: dict[str, str]) -> list[dict]:
    """[{run, hosts, text}] in run order; hosts: [] for a run's one job file."""
    own: dict[str, str] = {}
    of_hosts: dict[str, dict[str, str]] = {}
    for label, text in job_files.items():
        run, _, host = str(label).partition("/")
        if host:
            of_hosts.setdefault(run, {})[host] = str(text)
        else:
            own[run] = str(text)
    listed = []
    for run in sorted(own.keys() | of_hosts.keys()):
        if run in own:
            listed.append({"run": run, "hosts": [], "text": own[run]})
        texts = of_hosts.get(run, {})
        groups: dict[str, list[str]] = {}
        for host in sorted(texts):
            groups.setdefault(_with_placeholder(texts[host], host), []).append(host)
        for text, hosts in groups.items():
            shared = len(hosts) > 1
            listed.append({"run": run, "hosts": hosts, "text": text if shared else texts[hosts[0]]})
    return listed


def _with_placeholder(text: str, host: str) -> str:
    """The host's name as HOST_PLACEHOLDER where it is a word of its own (a path component)."""
    return re.sub(rf"(?<![\w.-]){re.escape(host)}(?![\w.-])", HOST_PLACEHOLDER, text)
