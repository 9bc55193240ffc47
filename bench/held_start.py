"""Where fio's I/O starts after a synchronized release: the start wrapper against a held start.

N fio processes (ioengine=null, 2 s, one job each) are started together as local processes,
each in its own folder, released at one instant `--lead` seconds ahead, two ways (and a
floor, below):
  wrapper: the start wrapper waits for the release and execs fio (fio's exec and set-up come
           after the release); the wrapper's own stamp is what a manifest used to record;
  held:    fio is exec'd at once and its job's exec_prerun (the start hook) waits for the
           release after fio's set-up.
Both jobs stamp the start of their I/O from exec_prerun (wrapper: `date +%s.%N` into fio's
prerun file; held: the hook's stamp), so both columns measure the same instant. A third way
is the floor under both:
  bare:    the hook's own script (the same wait and stamp) in N shells of their own, no tool
           around them and nothing started after the stamp: how late and how spread N waits
           on this machine wake at one instant, which no start of a tool can beat here.
All processes share this machine's cores, as the loopback lab's hosts do. Writes
bench/out/held_start.json: per way and N, the first and last start after the release and
their spread (and the wrapper's own stamps).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

from common import OUT, REPO, print_table, write_result

sys.path.insert(0, str(REPO))
from storbench.core import start_hook  # noqa: E402
from storbench.run import start  # noqa: E402

WORK = OUT / "held-start-work"
HOOKS = {"wrapper": "date +%s.%N", "held": start_hook.COMMAND}
WAYS = ("wrapper", "held", "bare")
# bare: the hook's script with its stamp descriptor open on the shell's stderr
BARE_SCRIPT = f'exec {start.STAMP_FD}>&2; eval "$1"'


def launch(way: str, hosts: int, lead_s: float, rate_iops: int | None = None) -> dict:
    folder = WORK / f"{way}-{hosts}"
    shutil.rmtree(folder, ignore_errors=True)
    release = time.time() + lead_s
    processes = []
    for index in range(hosts):
        host = folder / f"h{index}"
        host.mkdir(parents=True)
        if way == "bare":
            command = ["sh", "-c", BARE_SCRIPT, "bare", start.hook_script(release)]
        else:
            command = fio_command(way, host, index, release, rate_iops)
        with open(host / "stderr", "wb") as stderr:
            processes.append(subprocess.Popen(command, cwd=host, stderr=stderr))
    launched_s = time.time() - (release - lead_s)
    for process in processes:
        if process.wait() != 0:
            raise RuntimeError(f"{way} failed in {folder}")
    wrapper_stamps, io_starts = [], []
    for index in range(hosts):
        host = folder / f"h{index}"
        stamp, _ = start.take_stamps(host / "stderr")
        if way in ("held", "bare"):
            io_starts.append(stamp)
        else:
            wrapper_stamps.append(stamp)
            io_starts.append(float((host / f"r{index}.prerun.txt").read_text()))
    shutil.rmtree(folder)
    result = {"way": way, "hosts": hosts, "lead_s": lead_s, "launch_s": round(launched_s, 3)}
    if rate_iops:
        result["rate_iops"] = rate_iops
    result["io_start"] = spread(io_starts, release)
    if wrapper_stamps:
        result["wrapper_stamp"] = spread(wrapper_stamps, release)
    return result


def fio_command(
    way: str, host: Path, index: int, release: float, rate_iops: int | None
) -> list[str]:
    job = host / "job.fio"
    job.write_text(
        f"[r{index}]\nioengine=null\nsize=1m\nrw=read\nruntime=2s\ntime_based=1\n"
        + (f"rate_iops={rate_iops}\n" if rate_iops else "")
        + f"exec_prerun={HOOKS[way]}\n"
    )
    argv = ["fio", str(job), "--output-format=json", f"--output={host / 'out.json'}"]
    if way == "held":
        return start.held_at_release(argv, release, str(host))
    return start.at_release(argv, release)


def spread(stamps: list, release: float) -> dict:
    return {
        "first_after_release_s": round(min(stamps) - release, 3),
        "last_after_release_s": round(max(stamps) - release, 3),
        "spread_s": round(max(stamps) - min(stamps), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--lead", type=float, default=2.0, help="seconds to the release")
    parser.add_argument("--ways", nargs="+", choices=WAYS, default=list(WAYS))
    parser.add_argument(
        "--rate-iops", type=int,
        help="each fio offers this rate (rate_iops): started jobs leave the cores to the rest",
    )  # fmt: skip
    args = parser.parse_args()
    results = [
        launch(way, hosts, args.lead, args.rate_iops) for hosts in args.hosts for way in args.ways
    ]
    rows = []
    for result in results:
        io = result["io_start"]
        started = "waits" if result["way"] == "bare" else "fio"
        rows.append((
            f"{result['way']:8s} {result['hosts']:4d} {started}",
            f"start {io['first_after_release_s']:+.3f} .. {io['last_after_release_s']:+.3f}"
            f" s after the release, spread {io['spread_s']:.3f} s",
        ))  # fmt: skip
    print_table(f"the start after a release {args.lead} s ahead", rows)
    path = write_result("held_start", {"runs": results, "note": __doc__})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
