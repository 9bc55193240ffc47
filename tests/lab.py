"""A loopback lab for trying multi-host configs: `make lab` / `make lab-stop`.

Starts one real sshd per address 127.0.0.2 .. 127.0.0.<1+n> on port 2200, with a client key
and known_hosts in .cache/lab/, as config/examples/scale-test-loopback.yaml expects.
The sshd processes keep running after this script exits; `stop` ends them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
from pathlib import Path

from tests.sshd import SshLab, start_sshd

LAB_DIR = Path(".cache/lab")
PORT = 2200


def start(count: int) -> None:
    stop()
    shutil.rmtree(LAB_DIR, ignore_errors=True)  # a new key: ssh-keygen will not overwrite one
    LAB_DIR.mkdir(parents=True, exist_ok=True)
    lab = SshLab(LAB_DIR.resolve())
    for index in range(count):
        address = f"127.0.0.{2 + index}"
        server = start_sshd(
            address, lab.directory / f"sshd-{address}", lab.authorized_keys, port=PORT
        )
        with open(lab.known_hosts, "a") as known_hosts:
            known_hosts.write(server.known_hosts_line() + "\n")
        print(f"sshd on {address}:{PORT} (pid {server.process.pid})")
    print(f"client key {lab.client_key}, known hosts {lab.known_hosts}")


def stop() -> None:
    for pidfile in LAB_DIR.glob("sshd-*/sshd.pid"):
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pidfile.read_text()), signal.SIGTERM)
        pidfile.unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("--hosts", type=int, default=4)
    args = parser.parse_args()
    start(args.hosts) if args.action == "start" else stop()


if __name__ == "__main__":
    main()
