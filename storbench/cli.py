"""Entry points, one per workflow step: ``python -m storbench <step> ...``.

Each step can also be run by hand for debugging; errors print one clear message and exit 1.
Heavy modules (pandas, pyarrow, matplotlib) are imported only by the steps that need them.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import math
import os
import re
import sys
from pathlib import Path

from storbench.core import paths
from storbench.core.report_units import DEFAULT_UNITS, UNIT_SYSTEMS
from storbench.core.specs import Manifest, ProbeSpec, RunSpec, SpecError, with_keys


def _check(args) -> int:
    # this step's modules only: every step starts fast
    from storbench.config import campaign as config
    from storbench.config.source import ConfigError, with_lines
    from storbench.plan import checks
    from storbench.run.render import own_job_problems

    warnings = WarningCount(sys.stderr)
    sys.stderr = warnings
    try:
        campaign = config.load_campaign_file(args.config)
    finally:
        sys.stderr = warnings.stream
    paths.use_campaign(campaign.name)
    problems = checks.adapter_problems(campaign) + own_job_problems(campaign)
    if problems:
        raise with_lines(ConfigError(problems, source=str(args.config)), [args.config])
    for name, experiment in campaign.experiments.items():
        runs = campaign.experiment_runs(name)
        hosts = [h["name"] for h in campaign.hosts_of(name)]
        planned = (
            f"a latency-SLO search of at most {experiment.search['probes']} probe run(s),"
            f" each decided by the ones before it, {experiment.iterations} at the answer"
            if experiment.search
            else f"{len(runs)} run(s) x {experiment.iterations} iteration(s)"
        )
        print(
            f"{name}: {experiment.tool} on {len(hosts)} host(s) [{', '.join(hosts)}] "
            f"-> target {experiment.target_name}; {planned}"
        )
        if args.runs:
            for run in runs:
                print(f"  {run.run_id}")
    if args.strict and warnings.count:
        print(f"storbench: error: --strict: {warnings.count} warning(s) above", file=sys.stderr)
        return 1
    return 0


class WarningCount:
    """stderr, counting storbench's warnings written through it (check --strict)."""

    def __init__(self, stream):
        self.stream = stream
        self.count = 0

    def write(self, text: str) -> int:
        self.count += text.count("storbench: warning:")
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()


def _render(args) -> int:
    # this step's modules only: every step starts fast
    from storbench.run import render

    render.write_job(args.spec, args.output, args.facts)
    return 0


def _render_hosts(args) -> int:
    # this step's modules only: every step starts fast
    from storbench.run import render

    written = render.write_host_jobs(args.spec, args.output_dir)
    print(f"{len(written)} host job files in {args.output_dir}")
    return 0


def _run(args) -> int:
    # this step's modules only: every step starts fast
    from storbench.run import engine as runner

    spec = RunSpec.from_dict(args.spec)
    if args.timeout_s is not None:
        spec = dataclasses.replace(spec, timeout_s=args.timeout_s)
    job = args.job[0]
    if spec.per_host_jobs:  # jobs/<run_id>/<host><suffix>, one per host
        files = _job_file_paths(args.job)
        job = {path.name.rsplit(".", 1)[0]: str(path) for path in files}
    if spec.preparation:  # the target must still be in the state the run is tagged with
        # this step's modules only: every step starts fast
        from storbench.run import prepare

        spec = spec.with_state(prepare.run_state(spec.preparation, list(spec.hosts)))
    manifest = runner.run_iteration(spec, args.iteration, job, args.manifest, args.log)
    for host in manifest.hosts:
        print(
            f"{host['name']}: exit {host['exit_code']} ({host['start_time']} .. {host['end_time']})"
        )
    return 0


def _parse(args) -> int:
    # this step's modules only: every step starts fast
    from storbench.analysis import ingest

    rows = ingest.parse_iteration(args.manifest, args.output, args.timeseries)
    print(f"{args.output}: {len(rows)} rows")
    return 0


def _gather(args) -> int:
    # this step's modules only: every step starts fast
    from storbench.analysis import ingest

    rows = ingest.gather(args.parsed, args.output, args.timeseries)
    print(f"{args.output}: {rows} rows")
    return 0


def _report(args) -> int:

    # this step's modules only: every step starts fast
    from storbench.report import experiment as report

    meta = with_keys("report meta", args.meta, {"title": "str"}, REPORT_META_KEYS)
    meta["job_files"] = {_job_label(p): p.read_text() for p in _job_file_paths(args.job_files)}
    facts = None
    if args.telemetry:
        # this step's modules only: every step starts fast
        from storbench.run import telemetry

        facts = telemetry.load(args.telemetry)
    written = report.build_report(
        args.summary,
        args.out_dir,
        title=meta["title"],
        meta=meta,
        telemetry=facts,
        timeseries_source=args.timeseries,
        manifests=[Manifest.from_json(Path(path).read_text()) for path in args.manifests or []],
        figure_cache=args.figure_cache,
        workers=args.workers,
    )
    for name, path in written.items():
        print(f"{name}: {path}")
    return 0


# what the experiment report reads of its meta besides its title, where a hand-made one has it
REPORT_META_KEYS = {
    "hosts": "tuple[str, ...]", "run_ids": "tuple[str, ...]", "target_set": "tuple[str, ...]",
    "target": "dict", "job": "dict", "sweep": "dict", "steps": "dict | None",
    "data_path": "dict | None", "preparation": "dict | None", "iterations": "int",
    "max_start_skew_s": "float | None", "slow_host_percent": "float | None",
}  # fmt: skip
# what the campaign report reads of its meta; every key may be left out of a hand-made one
CAMPAIGN_META_KEYS = {
    "title": "str", "name": "str", "experiments": "dict", "hosts": "tuple[dict, ...]",
    "targets": "dict", "config_yaml": "str", "tables": "dict", "storage": "dict",
}  # fmt: skip


def _campaign_meta(data: object) -> dict:
    """The campaign report's meta, its mappings' entries checked too (a hand-made one)."""
    meta = with_keys("campaign report meta", data, {}, CAMPAIGN_META_KEYS)
    for key in ("experiments", "targets"):
        for name, value in (meta.get(key) or {}).items():
            if not isinstance(value, dict):
                raise SpecError(f"campaign report meta spec: {key}.{name} must be a mapping")
    for index, host in enumerate(meta.get("hosts") or []):
        if not isinstance(host.get("name"), str):
            raise SpecError(f"campaign report meta spec: hosts[{index}] needs a name")
    return meta


def _campaign_report(args) -> int:
    # this step's modules only: every step starts fast
    from storbench.report import campaign as campaign_report

    facts = None
    if args.telemetry:
        # this step's modules only: every step starts fast
        from storbench.run import telemetry

        facts = telemetry.load(args.telemetry)
    meta = _campaign_meta(args.meta)
    written = campaign_report.build_campaign_report(
        args.summaries, args.searches, args.out_dir, meta, facts
    )
    for name, path in written.items():
        print(f"{name}: {path}")
    return 0


def _pdf(args) -> int:
    # this step's modules only: every step starts fast
    from storbench.report import pdf

    if len(args.html) != len(args.pdf):
        raise SystemExit(f"storbench pdf: {len(args.html)} --html but {len(args.pdf)} --pdf")
    for written in pdf.print_pdfs(
        list(zip(args.html, args.pdf, strict=True)), timeout_s=args.timeout
    ):
        print(written)
    return 0


def _job_file_paths(given: list[str]) -> list[Path]:
    """The job files, a run's host job folder (service mode, host split) giving its files."""
    found: list[Path] = []
    for path in map(Path, given):
        found += sorted(path.iterdir()) if path.is_dir() else [path]
    return found


def _job_label(path: Path) -> str:
    """'<run>' for a run's job file, '<run>/<host>' for a host's own job file."""
    return path.stem if path.parent.name == "jobs" else f"{path.parent.name}/{path.stem}"


def _preflight(args) -> int:
    # this step's modules only: every step starts fast
    from storbench.run import preflight

    spec = with_keys(
        "preflight",
        args.spec,
        {"experiment": "str", "hosts": "tuple[host, ...]", "target": "target", "tool": "str"},
        {"require_same_version": "bool"},
    )
    report = preflight.run_preflight(spec, args.output)
    for host in report["hosts"]:
        free = host.get("free_bytes")
        print(
            f"{host['name']}: {host.get('version') or host['tool_version']}; "
            f"clock offset {host.get('clock_offset_s')} s"
            + (f"; {free / 2**30:.1f} GiB free on the target" if free is not None else "")
        )
    for warning in report["warnings"]:
        print(f"warning: {warning}")
    return 0


def _prepare_bucket(args) -> int:
    # this step's modules only: every step starts fast
    from storbench.run import s3

    target = with_keys("prepare-bucket", {"target": args.target}, {"target": "target"})["target"]
    marker = s3.prepare_bucket(target["name"], target, args.bucket, args.marker)
    state = "created" if marker["created"] else "already there"
    print(f"bucket {args.bucket} on {target['endpoint']}: {state}")
    return 0


def _cleanup(args) -> int:
    # this step's modules only: every step starts fast
    from storbench.run import cleanup

    for line in cleanup.cleanup(args.spec):
        print(line)
    return 0


def _setup(args) -> int:
    # this step's modules only: every step starts fast
    from storbench.run import setup

    marker = setup.run_setup(args.spec, args.output)
    print(f"setup {marker['step']} on {marker['host']}: {marker['state']} ({marker['command']})")
    return 0


def _services(args) -> int:
    # this step's modules only: every step starts fast
    from storbench.core import atomic
    from storbench.hosts import services

    spec = with_keys(
        "services", args.spec, {"hosts": "tuple[host, ...]", "port": "int", "tool": "str"}
    )
    if args.action == "stop":
        services.stop_services(spec["hosts"], spec["tool"], spec["port"])
        print(f"{spec['tool']} services stopped on {len(spec['hosts'])} host(s)")
        return 0
    started = services.start_services(spec["hosts"], spec["tool"], spec["port"])
    if args.output:
        atomic.write_json(args.output, {"tool": spec["tool"], "services": started})
    for entry in started:
        print(f"{entry['host']}: {spec['tool']} service answering on {entry['endpoint']}")
    return 0


def _plan(args) -> int:
    # this step's modules only: every step starts fast
    from storbench.config import campaign as config
    from storbench.run import show_plan

    if args.config_json:
        campaign = config.load_campaign(args.config_json)
    else:
        campaign = config.load_campaign_file(args.config)
    paths.use_campaign(campaign.name)
    sys.stdout.write(show_plan.describe_campaign(campaign, args.experiment or None))
    return 0


def _progress(args) -> int:
    # this step's modules only: every step starts fast
    from storbench.config import campaign as config
    from storbench.run import progress

    workdir = Path(args.workdir)
    if not workdir.is_dir():  # a mistyped folder showed 0 runs done
        code = errno.ENOTDIR if workdir.exists() else errno.ENOENT
        raise OSError(code, os.strerror(code), f"--workdir {workdir}")
    campaign = config.load_campaign_file(args.config)
    paths.use_campaign(campaign.name)
    print(progress.campaign_progress(campaign, workdir).describe())
    return 0


def _network(args) -> int:
    # this step's modules only: every step starts fast
    from storbench.run import netcheck

    spec = with_keys("network", args.spec, {})  # its keys: run_network_check names them
    rows = netcheck.run_network_check(spec, args.out_dir, args.log)
    netcheck.write_results(rows, args.parquet)
    min_fraction = spec.get("min_fraction", 0.8)
    flagged = netcheck.slow_clients(rows, min_fraction)
    print(f"{args.parquet}: {len(rows)} rows")
    print(netcheck.describe_slow_clients(flagged, min_fraction))
    return 0


def _network_report(args) -> int:
    # this step's modules only: every step starts fast
    from storbench.report import network

    written = network.build_network_report(
        args.parquet, args.out_dir, min_fraction=args.min_fraction
    )
    print("\n".join(str(path) for path in written.values()))
    return 0


# each host's (specs.telemetry_spec)
TELEMETRY_KEYS = {"host": "host", "targets": "tuple[target, ...]", "tools": "tuple[str, ...]"}


def _telemetry(args) -> int:
    spec = with_keys("telemetry", args.spec, TELEMETRY_KEYS)
    return _collect_telemetry([{**spec, "output": args.output}])


def _telemetry_hosts(args) -> int:
    hosts = with_keys("telemetry-hosts", args.spec, {"hosts": "tuple[dict, ...]"})["hosts"]
    keys = {**TELEMETRY_KEYS, "output": "str"}
    return _collect_telemetry([with_keys("telemetry-hosts host", host, keys) for host in hosts])


def _collect_telemetry(hosts: list[dict]) -> int:
    """Each {host, targets, tools, output}'s facts, collected at once and written."""
    # this step's modules only: every step starts fast
    from storbench.run import telemetry

    entries = [{**host, "target": telemetry.facts_target(host["targets"])} for host in hosts]
    for name, facts in telemetry.collect_each(entries).items():
        print(f"{name}: {facts.get('kernel')}, {facts.get('cores')} cores")
    return 0


def _import(args) -> int:

    # this step's modules only: every step starts fast
    from storbench.analysis import importing
    from storbench.tools import known_tools

    tools = [args.tool] if args.tool else list(known_tools())
    if args.tool and args.tool not in known_tools():
        raise importing.ImportInputError(
            f"unknown tool {args.tool!r} (known: {', '.join(known_tools())})"
        )
    lines = importing.import_outputs(
        [Path(p) for p in args.paths],
        tools,
        experiment=args.experiment,
        output=Path(args.output),
        series_output=Path(args.series) if args.series else None,
        replace=args.replace,
    )
    print("\n".join(lines))
    return 0


def _prepare(args) -> int:
    """One preparation job: a dataset, a recipe stage, its summary, its flush, or its report."""
    if args.action == "report":
        # this step's modules only: every step starts fast
        from storbench.report import preparation as prep_report

        written = prep_report.build_precondition_report(
            args.stages,
            args.prepared,
            args.out_dir,
            flushed=args.flushed,
            meta={"units": args.units},
        )
        print("\n".join(str(path) for path in written.values()))
        return 0
    # this step's modules only: every step starts fast
    import signal

    # this step's modules only: every step starts fast
    from storbench.analysis import preparation
    from storbench.hosts.transport import raise_interrupt
    from storbench.run import prepare

    # Snakemake stops a job with SIGTERM: a purge or flush command must stop on the host too
    signal.signal(signal.SIGTERM, raise_interrupt)
    spec = args.spec
    if args.limits is not None:
        # this step's modules only: every step starts fast
        from storbench.plan import preparation as prepare_plan

        spec = prepare_plan.with_limits(spec, args.limits)
    if args.action == "dataset":
        result = prepare.prepare_dataset(spec, args.output)
    elif args.action == "stage":
        result = preparation.run_stage(spec, args.output)
    elif args.action == "finish":
        result = preparation.finish(spec, args.stages, args.output)
    else:
        result = prepare.flush(spec, args.output)
    print(json.dumps({k: v for k, v in result.items() if k != "series"}, sort_keys=True)[:2000])
    return 0


# what a search's report reads of its meta, where a hand-made one has it
SEARCH_META_KEYS = {
    "title": "str", "config_yaml": "str", "tool": "str", "hosts": "tuple[str, ...]",
    "target": "dict", "job": "dict",
}  # fmt: skip


def _search(args) -> int:
    """One probe of a latency-SLO search, the search's result, or its report."""
    if args.action == "report":
        # this step's modules only: every step starts fast
        from storbench.report import search as search_report

        meta = with_keys("search report meta", args.meta or {}, {}, SEARCH_META_KEYS)
        written = search_report.build_search_report(args.result, args.summary, args.out_dir, meta)
        print("\n".join(str(path) for path in written.values()))
        return 0
    # this step's modules only: every step starts fast
    from storbench.analysis import search

    spec = ProbeSpec.from_dict(args.spec)
    if args.timeout_s is not None:
        spec = dataclasses.replace(spec, timeout_s=args.timeout_s)
    if args.action == "probe":
        marker = search.run_probe(spec, args.probe, args.markers, args.output, args.log)
        print(json.dumps({k: v for k, v in marker.items() if k != "measured"}, sort_keys=True))
        return 0
    result = search.gather(spec, args.markers, args.output, args.summary, args.timeseries)
    print(json.dumps(result["answer"], sort_keys=True)[:2000])
    return 0


def _compare(args) -> int:
    """A comparison report of B against A, or the check that fails on its regressions."""
    if args.action == "check":
        return _compare_check(args.regressions, args.output)
    # this step's modules only: every step starts fast
    from storbench.report import compare

    thresholds = _thresholds(args.threshold)
    try:
        summary = compare.build_comparison(
            args.a,
            args.b,
            args.out_dir,
            a_label=args.a_label or args.a,
            b_label=args.b_label or args.b,
            thresholds=thresholds,
            units=args.units,
        )
    except (FileNotFoundError, ValueError) as error:  # a missing source or a bad threshold
        raise CompareInputError(str(error)) from None
    print(
        f"{args.out_dir}: {summary['cells']} matched cell(s), {summary['significant']} "
        f"significant change(s), {summary['unmatched']} unmatched, "
        f"{len(summary['regressions'])} regression(s)"
    )
    for warning in summary["warnings"]:
        print(f"warning: {warning}")
    return 0


def _thresholds(pairs: list[str]) -> dict[str, str]:
    """['iops=-5%', 'p99_ns=+10%'] -> {'iops': '-5%', 'p99_ns': '+10%'}."""
    thresholds = {}
    for pair in pairs:
        metric, sign, limit = pair.partition("=")
        if not sign:
            raise CompareInputError(f"--threshold {pair!r}: expected METRIC=CHANGE, e.g. iops=-5%")
        thresholds[metric.strip()] = limit.strip()
    return thresholds


def _compare_check(regressions_path: str, output: str | None) -> int:
    # this step's modules only: every step starts fast
    from storbench.core import atomic
    from storbench.core.markers import read_marker

    keys = ("a", "b", "thresholds", "regressions")  # report.compare writes them
    verdict = read_marker(regressions_path, keys, "comparison's regressions.json")
    if verdict["regressions"]:
        lines = "\n".join(f"  - {message}" for message in verdict["regressions"])
        raise RegressionError(
            f"{verdict['a']} vs {verdict['b']}: {len(verdict['regressions'])} regression(s) of "
            f"{verdict['b']} against {verdict['a']} beyond the thresholds "
            f"{json.dumps(verdict['thresholds'], sort_keys=True)}:\n{lines}"
        )
    if output:
        atomic.write_json(output, {**verdict, "passed": True})
    print(f"{verdict['a']} vs {verdict['b']}: no regression beyond the thresholds")
    for warning in verdict.get("warnings", []):  # not in a regressions.json written before them
        print(f"warning: {warning}")
    return 0


class CompareInputError(ValueError):
    pass


class RegressionError(RuntimeError):
    pass


def json_argument(text: str):
    """A JSON option value, or ``-``: read from stdin (a spec naming hundreds of hosts is past
    Linux's 128 KiB limit on one argument); argparse names the option when it is not JSON."""
    if text == "-":
        text = sys.stdin.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        if len(text) < 4096 and os.path.isfile(text):  # a spec saved to a file, named
            raise argparse.ArgumentTypeError(
                f"not valid JSON: {text} is a file; give - and the file on stdin (< {text})"
            ) from None
        raise argparse.ArgumentTypeError(f"not valid JSON ({error})") from None


class _Version(argparse.Action):
    """--version, read from the installed package only when asked (steps start fast)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib.metadata import PackageNotFoundError, version  # lazy: only when asked

        try:
            text = version("storbench")
        except PackageNotFoundError:
            text = "(not installed as a package)"
        print(f"storbench {text}")
        parser.exit()


def _units_argument(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    parser.add_argument(
        "--units",
        choices=UNIT_SYSTEMS,
        default=DEFAULT_UNITS,
        help=f"{prefix}bandwidth units, the config's report.units (default {DEFAULT_UNITS})",
    )


def whole_number_from_1(text: str) -> int:
    """An argparse type: an iteration number (iterations count from 1)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1, got {text!r}")
    return value


def seconds_above_0(text: str) -> float:
    """An argparse type: a time limit in seconds."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"expected seconds above 0, got {text!r}")
    return value


def _time_limit_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--timeout-s",
        type=seconds_above_0,
        help="an iteration's time limit in seconds, the config's timeout (default: the spec's)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="storbench", description=__doc__)
    parser.add_argument("--version", action=_Version, help="print storbench's version")
    steps = parser.add_subparsers(dest="step", required=True)

    check = steps.add_parser("check", help="validate a config and show the planned runs")
    check.add_argument("--config", default="config/config.yaml", help="the campaign config (YAML)")
    check.add_argument("--runs", action="store_true", help="list every run id")
    check.add_argument(
        "--strict", action="store_true", help="exit 1 on a warning too (a CI reviewing configs)"
    )
    check.set_defaults(handler=_check)

    render = steps.add_parser("render", help="render one run's job file")
    render.add_argument("--spec", type=json_argument, required=True, help="render spec (JSON)")
    render.add_argument("--output", required=True, help="job file to write")
    render.add_argument("--facts", help="the host's telemetry (JSON), for host-fact expressions")
    render.set_defaults(handler=_render)

    render_hosts = steps.add_parser(
        "render-hosts", help="render every host's own job file of one run, into one folder"
    )
    render_hosts.add_argument(
        "--spec", type=json_argument, required=True, help="host jobs spec (JSON)"
    )
    render_hosts.add_argument("--output-dir", required=True, help="the run's host job folder")
    render_hosts.set_defaults(handler=_render_hosts)

    run = steps.add_parser("run", help="run one iteration on every host of the run")
    run.add_argument("--spec", type=json_argument, required=True, help="run spec (JSON)")
    run.add_argument(
        "--iteration", type=whole_number_from_1, required=True, help="iteration number, from 1"
    )
    _time_limit_argument(run)
    run.add_argument("--job", required=True, nargs="+", help="rendered job file, or one per host")
    run.add_argument("--manifest", required=True, help="run.json to publish on success")
    run.add_argument(
        "--log", help="the log this step's output goes to; each attempt's is kept beside it"
    )
    run.set_defaults(handler=_run)

    parse = steps.add_parser("parse", help="raw output of one iteration -> Parquet")
    parse.add_argument("--manifest", required=True, help="the iteration's run.json")
    parse.add_argument("--output", required=True, help="result Parquet to write")
    parse.add_argument("--timeseries", help="Parquet file for per-interval rows")
    parse.set_defaults(handler=_parse)

    gather = steps.add_parser("gather", help="concatenate an experiment's parsed Parquet files")
    gather.add_argument("--output", required=True, help="the experiment's summary Parquet to write")
    gather.add_argument("--timeseries", help="Parquet file for the per-interval rows")
    gather.add_argument("parsed", nargs="+", help="parsed iteration Parquet files")
    gather.set_defaults(handler=_gather)

    report = steps.add_parser("report", help="tables, figures and index.html of an experiment")
    report.add_argument("--summary", required=True, help="the experiment's summary Parquet")
    report.add_argument("--out-dir", required=True, help="folder of the report")
    report.add_argument("--meta", type=json_argument, required=True, help="report metadata (JSON)")
    report.add_argument("--timeseries", help="the experiment's per-interval series (Parquet)")
    report.add_argument("--manifests", nargs="*", help="run manifests with fault records")
    report.add_argument("--telemetry", nargs="*", help="the hosts' telemetry (JSON files)")
    report.add_argument(
        "--figure-cache", help="folder keeping the figures drawn: a rebuild redraws changed ones"
    )
    report.add_argument(
        "--workers", type=int, help="processes drawing the figures (default: the cores available)"
    )
    report.add_argument(
        "job_files", nargs="*", help="the job files the runs used (shown in the report)"
    )
    report.set_defaults(handler=_report)

    campaign = steps.add_parser(
        "campaign-report", help="index.html and tables of every experiment of a campaign"
    )
    campaign.add_argument(
        "--meta", type=json_argument, required=True, help="campaign description (JSON)"
    )
    campaign.add_argument("--out-dir", required=True, help="folder of the campaign report")
    campaign.add_argument("--summaries", nargs="*", default=[], help="grid experiments' Parquet")
    campaign.add_argument("--searches", nargs="*", default=[], help="searches' search.json")
    campaign.add_argument("--telemetry", nargs="*", help="the hosts' telemetry (JSON files)")
    campaign.set_defaults(handler=_campaign_report)

    printing = steps.add_parser("pdf", help="print HTML reports to PDF with one headless Chromium")
    printing.add_argument(
        "--html", required=True, action="append", help="a report page to print (repeatable)"
    )
    printing.add_argument(
        "--pdf", required=True, action="append", help="the PDF of the n-th --html page"
    )
    printing.add_argument(
        "--timeout", type=seconds_above_0, default=120.0, help="seconds per page (default 120)"
    )
    printing.set_defaults(handler=_pdf)

    preflight = steps.add_parser("preflight", help="check every host before the first run")
    preflight.add_argument(
        "--spec", type=json_argument, required=True, help="preflight spec (JSON)"
    )
    preflight.add_argument("--output", required=True, help="preflight report (JSON) to write")
    preflight.set_defaults(handler=_preflight)

    bucket = steps.add_parser("prepare-bucket", help="create an S3 target's bucket")
    bucket.add_argument("--target", type=json_argument, required=True, help="target (JSON)")
    bucket.add_argument("--bucket", required=True, help="bucket name")
    bucket.add_argument("--marker", required=True, help="JSON marker to publish")
    bucket.set_defaults(handler=_prepare_bucket)

    cleanup = steps.add_parser(
        "cleanup", help="stop tool services and remove the buckets of S3 experiments"
    )
    cleanup.add_argument(
        "--spec",
        type=json_argument,
        required=True,
        help="{services: [service spec], buckets: [{target, buckets}]}",
    )
    cleanup.set_defaults(handler=_cleanup)

    progress = steps.add_parser(
        "progress", help="how far a campaign is: runs done, started, planned time left"
    )
    progress.add_argument("--config", default="config/config.yaml", help="the campaign config")
    progress.add_argument("--workdir", default=".", help="the workflow's working directory")
    progress.set_defaults(handler=_progress)

    setup = steps.add_parser("setup", help="run one client set-up step on one host")
    setup.add_argument("--spec", type=json_argument, required=True, help="setup spec (JSON)")
    setup.add_argument("--output", required=True, help="marker to publish once it is done")
    setup.set_defaults(handler=_setup)

    service = steps.add_parser("services", help="start or stop tool services on the hosts")
    service.add_argument(
        "action", choices=("start", "stop"), help="start or stop every host's service"
    )
    service.add_argument(
        "--spec", type=json_argument, required=True, help="{tool, port, hosts} (JSON)"
    )
    service.add_argument("--output", help="marker to publish once every service answers")
    service.set_defaults(handler=_services)

    plan_step = steps.add_parser(
        "plan", help="per run and host: command lines and job files, touching no host"
    )
    plan_step.add_argument(
        "--config", default="config/config.yaml", help="the campaign config (YAML)"
    )
    plan_step.add_argument(
        "--config-json", type=json_argument, help="the campaign config as JSON (from Snakemake)"
    )
    plan_step.add_argument("--experiment", action="append", help="only this experiment")
    plan_step.set_defaults(handler=_plan)

    network = steps.add_parser("network", help="iperf3 from every client to the server")
    network.add_argument(
        "--spec", type=json_argument, required=True, help="{server, clients, port, ...} (JSON)"
    )
    network.add_argument("--out-dir", required=True, help="folder for the raw iperf3 JSON")
    network.add_argument("--parquet", required=True, help="result Parquet to write")
    network.add_argument(
        "--log", help="the log this step's output goes to; each attempt's is kept beside it"
    )
    network.set_defaults(handler=_network)

    network_report = steps.add_parser("network-report", help="the network check's report")
    network_report.add_argument(
        "--parquet", required=True, help="the network check's result Parquet"
    )
    network_report.add_argument("--out-dir", required=True, help="folder of the report")
    network_report.add_argument(
        "--min-fraction",
        type=float,
        default=0.8,
        help="flag clients below this fraction of the median",
    )
    network_report.set_defaults(handler=_network_report)

    facts = steps.add_parser("telemetry", help="capture one host's facts")
    facts.add_argument(
        "--spec", type=json_argument, required=True, help="{host, targets, tools} (JSON)"
    )
    facts.add_argument("--output", required=True, help="telemetry (JSON) to write")
    facts.set_defaults(handler=_telemetry)

    hosts_facts = steps.add_parser(
        "telemetry-hosts", help="capture many hosts' facts at once, each into its own file"
    )
    hosts_facts.add_argument(
        "--spec",
        type=json_argument,
        required=True,
        help="{hosts: [{host, targets, tools, output}]} (JSON)",
    )
    hosts_facts.set_defaults(handler=_telemetry_hosts)

    prepare = steps.add_parser(
        "prepare", help="datasets and preconditioning: one stage, summary, flush or report"
    )
    prepare.add_argument(
        "action",
        choices=("dataset", "stage", "finish", "flush", "report"),
        help="which preparation step",
    )
    prepare.add_argument("--spec", type=json_argument, help="dataset, stage or recipe spec (JSON)")
    prepare.add_argument(
        "--limits", type=json_argument, help="the config's time limits (JSON), else the spec's"
    )
    prepare.add_argument("--output", help="marker to publish")
    prepare.add_argument("--prepared", help="report: the recipe's prepared.json")
    prepare.add_argument("--flushed", help="report: the recipe's flushed.json, if any")
    prepare.add_argument("--out-dir", help="report: folder of the page")
    prepare.add_argument("--stages", nargs="*", default=[], help="finish/report: stage markers")
    _units_argument(prepare, "report: ")
    prepare.set_defaults(handler=_prepare)

    search = steps.add_parser(
        "search", help="latency-SLO search: one probe, the gathered result, or the report"
    )
    search.add_argument("action", choices=("probe", "gather", "report"), help="which search step")
    search.add_argument("--spec", type=json_argument, help="probe/gather: the search spec (JSON)")
    search.add_argument("--probe", help="probe: its id, p01, p02 ...")
    _time_limit_argument(search)
    search.add_argument("--output", help="probe: its marker; gather: search.json")
    search.add_argument("--markers", nargs="*", default=[], help="earlier (or all) probe markers")
    search.add_argument(
        "--log", help="probe: the log its output goes to; each attempt's is kept by its run's"
    )
    search.add_argument("--summary", help="gather: result Parquet to write; report: to read")
    search.add_argument("--timeseries", help="gather: per-interval Parquet to write")
    search.add_argument("--result", help="report: search.json")
    search.add_argument("--meta", type=json_argument, help="report: experiment description (JSON)")
    search.add_argument("--out-dir", help="report: folder of the page")
    search.set_defaults(handler=_search)

    comparison = steps.add_parser(
        "compare", help="compare two experiments' results, or check a comparison's regressions"
    )
    compare_steps = comparison.add_subparsers(dest="action", required=True, help="report or check")
    compare_report = compare_steps.add_parser(
        "report", help="write comparison.csv/.md, index.html, regressions.json, unmatched.csv"
    )
    compare_report.add_argument("a", help="side A (before): summary.parquet or its folder")
    compare_report.add_argument("b", help="side B (after): summary.parquet or its folder")
    compare_report.add_argument("--out-dir", required=True)
    compare_report.add_argument("--a-label", help="name of side A in the report (default: a)")
    compare_report.add_argument("--b-label", help="name of side B in the report (default: b)")
    compare_report.add_argument(
        "--threshold",
        action="extend",
        nargs="*",
        default=[],
        metavar="METRIC=CHANGE",
        help="regression threshold: iops=-5%% bw_bytes_s=-5%% p99_ns=+10%% lat_mean_ns=+10%%",
    )
    _units_argument(compare_report)
    compare_check = compare_steps.add_parser(
        "check", help="exit 1 listing the regressions of a comparison's regressions.json"
    )
    compare_check.add_argument("regressions", help="the comparison's regressions.json")
    compare_check.add_argument("--output", help="passed.json to write when there is none")
    comparison.set_defaults(handler=_compare)

    imports = steps.add_parser(
        "import", help="turn a tool's outputs made outside storbench into result Parquet"
    )
    imports.add_argument(
        "--tool",
        help="only this tool's outputs (fio, elbencho, vdbench, warp, gosbench, iperf3); "
        "default: every tool, each recognising its own files by content",
    )
    imports.add_argument("--experiment", default="imported", help="experiment name in the rows")
    imports.add_argument("-o", "--output", required=True, help="Parquet file to write")
    imports.add_argument(
        "--series",
        help="Parquet file for the per-interval series (default <output>.timeseries.parquet)",
    )
    imports.add_argument(
        "--replace",
        action="store_true",
        help="overwrite an existing output (and its series, removed when the new rows have none)",
    )
    imports.add_argument("paths", nargs="+", help="raw output files or folders")
    imports.set_defaults(handler=_import)
    return parser


def _known_errors() -> tuple[type[BaseException], ...]:
    # this step's modules only: every step starts fast
    from storbench.analysis.importing import ImportInputError
    from storbench.config.source import ConfigError
    from storbench.core.markers import MarkerError
    from storbench.core.paths import PathComponentError
    from storbench.core.report_units import UnknownUnitsError
    from storbench.core.results import ResultsFileError, ResultValueError
    from storbench.core.secrets import SecretError
    from storbench.core.units import UnitError
    from storbench.hosts.open_files import OpenFilesError
    from storbench.hosts.services import ServiceError
    from storbench.hosts.transport import HostError
    from storbench.plan.search import SearchError
    from storbench.report.pdf import PdfError
    from storbench.run.engine import RunError
    from storbench.run.netcheck import NetcheckError, NetworkSpecError
    from storbench.run.preflight import PreflightError
    from storbench.run.prepare import PrepareError
    from storbench.run.render import RenderError
    from storbench.run.s3 import S3Error
    from storbench.run.setup import SetupError
    from storbench.run.telemetry import TelemetryError
    from storbench.tools import UnknownToolError
    from storbench.tools.base import ToolOutputError

    return (
        CompareInputError,
        ConfigError,
        MarkerError,
        HostError,
        ImportInputError,
        NetcheckError,
        NetworkSpecError,
        OpenFilesError,
        PathComponentError,
        PdfError,
        PreflightError,
        PrepareError,
        RegressionError,
        RenderError,
        ResultsFileError,
        ResultValueError,
        RunError,
        S3Error,
        SearchError,
        SecretError,
        ServiceError,
        SetupError,
        SpecError,
        TelemetryError,
        ToolOutputError,
        UnitError,
        UnknownToolError,
        UnknownUnitsError,
    )


def file_problem(error: OSError) -> str | None:
    """A missing or unreadable input named, or None for an OSError that is a bug."""
    if error.filename:
        return f"{error.filename}: {error.strerror or error}"
    if isinstance(error, FileNotFoundError) and error.args:  # pyarrow's names no filename
        text = str(error.args[-1])
        quoted = PYARROW_MISSING_FILE.search(text)
        return f"{quoted[1] if quoted else text}: No such file or directory"
    if error.errno in FULL_OR_READ_ONLY:  # a write no atomic output named: the machine's state
        return f"{os.strerror(error.errno)} ({error})"
    return None


PYARROW_MISSING_FILE = re.compile(r"Failed to open local file '(.+?)'\. Detail:")
FULL_OR_READ_ONLY = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except BrokenPipeError:  # `storbench check --runs | head`: the reader had enough
        # stdout's buffer would raise again at exit; point it at /dev/null first
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("storbench: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        if isinstance(error, _known_errors()):
            print(f"storbench: error: {error}", file=sys.stderr)
            return 1
        if isinstance(error, OSError) and (problem := file_problem(error)):
            print(f"storbench: error: {problem}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
