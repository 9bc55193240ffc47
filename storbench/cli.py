"""Entry points, one per workflow step: ``python -m storbench <step> ...``.

Each step can also be run by hand for debugging; errors print one clear message and exit 1.
Heavy modules (pandas, pyarrow, matplotlib) are imported only by the steps that need them.
"""

from __future__ import annotations

import argparse
import json
import sys


def _check(args) -> int:
    from storbench import config, plan

    campaign = config.load_campaign_file(args.config)
    for name, experiment in campaign.experiments.items():
        runs = plan.experiment_runs(campaign, name)
        hosts = [h["name"] for h in campaign.hosts_of(name)]
        print(
            f"{name}: {experiment.tool} on {len(hosts)} host(s) [{', '.join(hosts)}] "
            f"-> target {experiment.target_name}; {len(runs)} run(s) x "
            f"{experiment.iterations} iteration(s)"
        )
        if args.runs:
            for run in runs:
                print(f"  {run.run_id}")
    return 0


def _render(args) -> int:
    from storbench import render

    render.write_job(json.loads(args.spec), args.output)
    return 0


def _run(args) -> int:
    from storbench import runner

    manifest = runner.run_iteration(json.loads(args.spec), args.iteration, args.job, args.manifest)
    for host in manifest["hosts"]:
        print(
            f"{host['name']}: exit {host['exit_code']} ({host['start_time']} .. {host['end_time']})"
        )
    return 0


def _parse(args) -> int:
    from storbench import ingest

    rows = ingest.parse_iteration(args.manifest, args.output)
    print(f"{args.output}: {rows} rows")
    return 0


def _gather(args) -> int:
    from storbench import ingest

    rows = ingest.gather(args.parsed, args.output)
    print(f"{args.output}: {rows} rows")
    return 0


def _report(args) -> int:
    from pathlib import Path

    from storbench import report

    meta = json.loads(args.meta)
    meta["job_files"] = {Path(p).stem: Path(p).read_text() for p in args.job_files}
    written = report.build_report(args.summary, args.out_dir, title=meta["title"], meta=meta)
    for name, path in written.items():
        print(f"{name}: {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="storbench", description=__doc__)
    steps = parser.add_subparsers(dest="step", required=True)

    check = steps.add_parser("check", help="validate a config and show the planned runs")
    check.add_argument("--config", default="config/config.yaml")
    check.add_argument("--runs", action="store_true", help="list every run id")
    check.set_defaults(handler=_check)

    render = steps.add_parser("render", help="render one run's job file")
    render.add_argument("--spec", required=True, help="render spec (JSON)")
    render.add_argument("--output", required=True)
    render.set_defaults(handler=_render)

    run = steps.add_parser("run", help="run one iteration on every host of the run")
    run.add_argument("--spec", required=True, help="run spec (JSON)")
    run.add_argument("--iteration", type=int, required=True)
    run.add_argument("--job", required=True, help="rendered job file")
    run.add_argument("--manifest", required=True, help="run.json to publish on success")
    run.set_defaults(handler=_run)

    parse = steps.add_parser("parse", help="raw output of one iteration -> Parquet")
    parse.add_argument("--manifest", required=True)
    parse.add_argument("--output", required=True)
    parse.set_defaults(handler=_parse)

    gather = steps.add_parser("gather", help="concatenate an experiment's parsed Parquet files")
    gather.add_argument("--output", required=True)
    gather.add_argument("parsed", nargs="+")
    gather.set_defaults(handler=_gather)

    report = steps.add_parser("report", help="tables, figures and index.html of an experiment")
    report.add_argument("--summary", required=True)
    report.add_argument("--out-dir", required=True)
    report.add_argument("--meta", required=True, help="report metadata (JSON)")
    report.add_argument("job_files", nargs="*")
    report.set_defaults(handler=_report)
    return parser


def _known_errors() -> tuple[type[BaseException], ...]:
    from storbench.config import ConfigError
    from storbench.hosts import HostError
    from storbench.render import RenderError
    from storbench.runner import RunError
    from storbench.units import UnitError

    errors: list[type[BaseException]] = [ConfigError, HostError, RenderError, RunError, UnitError]
    try:
        from storbench.tools.fio_json import FioOutputError

        errors.append(FioOutputError)
    except ImportError:
        pass
    return tuple(errors)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("storbench: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        if isinstance(error, _known_errors()):
            print(f"storbench: error: {error}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
