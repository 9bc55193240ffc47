"""Scale-out analysis of result rows: scaling per client step, slow hosts, start skew, targets.

A workload point is one sweep point of an experiment on one target; its runs at different
client steps share the parameters (``params_json``) and differ in ``step``, ``hosts_in_run``
and the run id's step suffix (``_h4``, ``_host-client07``). Step labels are opaque: the host
count comes from ``hosts_in_run``, else from the step's host list, else from the host rows.

Bandwidth and IOPS of a step are means over iterations of the aggregate rows (host 'all'),
one row per op; a point whose ops ran at the same time (``ran_together``: a mixed pattern
such as fio's randrw, or a host-level read/write split) also gets a combined row (op
'read+write') summed per iteration. Ops that ran one after another (elbencho's phases, fio
sections with stonewall) are never summed: no phase reached their sum. The theoretical
maximum of a row comes from ``storbench.config.datapath`` for the hosts that carried its op.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd

from storbench.analysis import stats
from storbench.config import datapath
from storbench.core.aggregate import base_job
from storbench.core.results import ALL_HOSTS

PLACEMENT_COLUMNS = ("step", "hosts_in_run", "target", "start_skew_s")
POINT_PARAMETERS = ("rw", "bs", "iodepth", "numjobs", "rwmixread")
# Keys that name where a run ran, not what it ran: they may differ between runs of one point.
_PLACEMENT_PARAMS = frozenset(("target", "targets", "step", "steps", "hosts", "hosts_in_run"))
_POINT_GROUP = ["experiment", "target", "_point_key", "op"]
# Patterns whose operations run at the same time within one job: fio's (and elbencho's,
# vdbench's) read/write and trim/write mixes, warp's mixed benchmark.
MIXED_PATTERNS = frozenset(("rw", "readwrite", "randrw", "trimwrite", "randtrimwrite", "mixed"))
_DIGITS = re.compile(r"(\d+)")

SCALING_COLUMNS = (
    "experiment",
    "target",
    "point",
    "job",
    "op",
    *POINT_PARAMETERS,
    "step",
    "hosts",
    "op_hosts",
    "n",
    "bw_bytes_s_mean",
    "bw_bytes_s_sd",
    "iops_mean",
    "iops_sd",
    "theoretical_bytes_s",
    "bottleneck",
    "efficiency",
)
SLOW_HOST_COLUMNS = (
    "experiment",
    "target",
    "point",
    "job",
    "op",
    *POINT_PARAMETERS,
    "host",
    "step",
    "n",
    "bw_bytes_s_mean",
    "iops_mean",
    "median_bw_bytes_s",
    "below_median_percent",
    "flagged",
)
START_SKEW_COLUMNS = (
    "experiment",
    "target",
    "run_id",
    "step",
    "iteration",
    "hosts",
    "start_skew_s",
    "last_host",
    "flagged",
)
TARGET_COLUMNS = (
    "experiment",
    "point",
    "job",
    "op",
    *POINT_PARAMETERS,
    "step",
    "hosts",
    "target",
    "n",
    "bw_bytes_s_mean",
    "bw_bytes_s_sd",
    "iops_mean",
    "iops_sd",
    "sum_alone_bytes_s",
    "together_vs_sum",
)


# ---------------------------------------------------------------------------------------
# Shared preparation


def prepared(frame) -> pd.DataFrame:
    """Last attempts only, placement columns present, and each row's workload point."""
    frame = stats.as_frame(frame)
    missing = {column: pd.NA for column in PLACEMENT_COLUMNS if column not in frame}
    frame = stats.latest_attempts(frame.assign(**missing))
    if frame.empty:
        return frame.assign(point=pd.Series(dtype=object), _point_key=pd.Series(dtype=object))
    runs_and_steps = zip(frame["run_id"], frame["step"], strict=True)
    labels = [_point_label(run, step) for run, step in runs_and_steps]
    keys = [_point_key(row) for row in frame.itertuples(index=False)]
    return frame.assign(point=labels, _point_key=keys)


def _point_label(run_id: str, step) -> str:
    """The run id without its step suffix: 'read_bs1m_h4' -> 'read_bs1m'."""
    if _present(step) and str(run_id).endswith(f"_{step}"):
        return str(run_id)[: -len(str(step)) - 1]
    return str(run_id)


def _point_key(row) -> str:
    """What runs of one workload point share: experiment, sweep parameters, job name."""
    params_json = getattr(row, "params_json", None)
    if _present(params_json):
        point = json.loads(str(params_json))
        params = {k: v for k, v in point.items() if k not in _PLACEMENT_PARAMS}
    else:
        params = {name: _plain(getattr(row, name, None)) for name in POINT_PARAMETERS}
        # Without the sweep point (an imported result) equal parameters do not make two runs
        # one point: elbencho's dirmode and a 2-host service run were averaged into one row.
        params["run_id"] = str(row.run_id)
    # fio names a run's job after the run, so the job differs between steps of one point.
    job_base = _job_label(row.job, row.run_id, "{run}") if _present(row.job) else ""
    return json.dumps([str(row.experiment), params, job_base], sort_keys=True, default=str)


def _point_identity(first) -> dict:
    """Which sweep point, job and operation a scaling or per-host row belongs to."""
    return {
        "experiment": first["experiment"],
        "target": first["target"],
        "point": first["point"],
        "job": _job_label(first["job"], first["run_id"], first["point"]),
        "op": first["op"],
        **{name: first.get(name) for name in POINT_PARAMETERS},
    }


def _job_label(job, run_id, point) -> str:
    """The job name with the run id replaced by the point's, without a clone index ('[3]')."""
    return str(base_job(str(job))).replace(str(run_id), str(point))


def _plain(value):
    return None if not _present(value) else value.item() if hasattr(value, "item") else value


def _present(value) -> bool:
    if value is None or value is pd.NA:
        return False
    return not (isinstance(value, float) and math.isnan(value))


def natural_key(text) -> tuple:
    """'client10' after 'client9': digit runs compare as numbers."""
    return tuple(int(part) if part.isdigit() else part for part in _DIGITS.split(str(text)))


def stepping_mode(frame, steps_meta: dict | None = None) -> str | None:
    """'incremental', 'constant' or None (no steps): from the config, else from the data."""
    if steps_meta and steps_meta.get("mode"):
        return str(steps_meta["mode"])
    frame = stats.as_frame(frame)
    if "step" not in frame or not frame["step"].notna().any():
        return None
    if "hosts_in_run" not in frame:
        return "incremental"
    counts = frame.dropna(subset=["step"]).groupby("step")["hosts_in_run"].max()
    steps = len(counts)
    return "constant" if steps > 1 and counts.nunique(dropna=False) == 1 else "incremental"


# ---------------------------------------------------------------------------------------
# Scaling table


def scaling_table(frame, data_path: dict | None = None, hosts_by_step: dict | None = None):
    """One row per (workload point, target, op, step), in SCALING_COLUMNS.

    ``hosts``: hosts in the run; ``op_hosts``: hosts that carried the op; bandwidth and IOPS
    mean and sample sd over iterations of the aggregate rows. With ``data_path``:
    ``theoretical_bytes_s`` and ``bottleneck`` for the op's hosts (see datapath.theoretical_max)
    and ``efficiency`` = measured mean / theoretical. ``hosts_by_step``: {step label:
    [{name, group}]}, needed for per-group link rates.
    """
    rows = prepared(frame)
    means = point_means(rows, hosts_by_step or {})
    theory = [
        _theoretical(data_path, hosts) if data_path else (math.nan, None)
        for hosts in means.pop("_op_host_specs")
    ]
    means["theoretical_bytes_s"] = [value for value, _ in theory]
    means["bottleneck"] = [name for _, name in theory]
    means["efficiency"] = means["bw_bytes_s_mean"] / means["theoretical_bytes_s"]
    means = means.astype({"theoretical_bytes_s": "float64", "efficiency": "float64"})
    return means[list(SCALING_COLUMNS)].reset_index(drop=True)


def _theoretical(data_path: dict, hosts: list[dict] | None) -> tuple[float, str | None]:
    if not hosts:
        return math.nan, "hosts of the step unknown"
    return datapath.theoretical_max(data_path, hosts)


def point_means(rows: pd.DataFrame, hosts_by_step: dict) -> pd.DataFrame:
    """Means per (point, target, op, step) of prepared rows, with host lists (internal)."""
    aggregate = rows[rows["host"] == ALL_HOSTS]
    per_host = rows[rows["host"] != ALL_HOSTS]
    aggregate = pd.concat([aggregate, _combined_ops(aggregate, per_host)], ignore_index=True)
    records = []
    for _, group in aggregate.groupby([*_POINT_GROUP, "step"], sort=False, dropna=False):
        records.append(_means_record(group, per_host, hosts_by_step))
    columns = [*SCALING_COLUMNS[:-3], "_point_key", "_op_host_specs"]
    table = pd.DataFrame.from_records(records, columns=columns)
    table = table.astype(
        {
            **dict.fromkeys(("bs", "iodepth", "numjobs", "rwmixread", "hosts"), "Int64"),
            **dict.fromkeys(("op_hosts", "n"), "Int64"),
            **dict.fromkeys(("bw_bytes_s_mean", "bw_bytes_s_sd", "iops_mean", "iops_sd"), float),
        }
    )
    return _sorted(table, ["target", "rw", "bs", "iodepth", "numjobs", "point", "job", "op"])


def _combined_ops(aggregate: pd.DataFrame, per_host: pd.DataFrame) -> pd.DataFrame:
    """Per iteration, one row summing the ops of a point that ran at the same time
    (``ran_together``; op 'read+write')."""
    keys = ["experiment", "target", "_point_key", "step", "run_id", "iteration"]
    return _summed_ops(aggregate, per_host, keys, ("bw_bytes_s", "iops"), ())


# percentiles and means of different ops are not combined
_NOT_SUMMED = ("lat_mean_ns", "clat_mean_ns", "hist_ns", "hist_count", "lat_basis",
               "pct_source", "p50_ns", "p90_ns", "p99_ns", "p99_9_ns", "p99_99_ns")  # fmt: skip


def together_rows(frame) -> pd.DataFrame:
    """Aggregate rows (host 'all') summing, per run iteration and job, the ops that ran at
    the same time (``ran_together``), op 'read+write'; bandwidth, IOPS, bytes, I/Os and
    errors summed, latency left empty (percentiles of different ops are not combined).
    ``stats.summarize`` of them gives a mixed run's combined mean and interval."""
    frame = stats.latest_attempts(stats.as_frame(frame))
    aggregate = frame[frame["host"] == ALL_HOSTS]
    per_host = frame[frame["host"] != ALL_HOSTS]
    keys = ["experiment", "run_id", "iteration", "job", *(["target"] if "target" in frame else [])]
    summed = ("bw_bytes_s", "iops", "bytes", "ios", "errors")
    return _summed_ops(aggregate, per_host, keys, summed, _NOT_SUMMED).reset_index(drop=True)


def _summed_ops(
    aggregate: pd.DataFrame, per_host: pd.DataFrame, keys: list, summed: tuple, emptied: tuple
) -> pd.DataFrame:
    """One row per group of ``keys`` whose ops ran together: op 'read+write', the ``summed``
    columns summed, the ``emptied`` ones left empty; the hosts' rows of each run iteration
    tell a host-level split (``ran_together``)."""
    run_keys = ["experiment", "run_id", "iteration"]
    hosts = {key: rows for key, rows in per_host.groupby(run_keys, sort=False, dropna=False)}
    combined = []
    for _, group in aggregate.groupby(keys, sort=False, dropna=False):
        if group["op"].nunique() < 2:
            continue
        first = group.iloc[0]
        key = tuple(first[column] for column in run_keys)
        if not ran_together(group, hosts.get(key, per_host.iloc[0:0])):
            continue
        row = first.copy()
        row["op"] = "+".join(sorted(group["op"].unique(), key=_op_order))
        for column in summed:
            if column in group:
                row[column] = group[column].sum(min_count=1)
        for column in emptied:
            if column in group:
                row[column] = None
        combined.append(row)
    if not combined:
        return aggregate.iloc[0:0]
    return pd.DataFrame(combined, columns=aggregate.columns)


def mixed_pattern(rows: pd.DataFrame) -> bool:
    """Every row's pattern (``rw``) is a mix whose operations run at the same time."""
    if "rw" not in rows or rows.empty:
        return False
    return all(_present(rw) and str(rw).lower() in MIXED_PATTERNS for rw in rows["rw"])


def ran_together(aggregate: pd.DataFrame, per_host: pd.DataFrame) -> bool:
    """Did the ops of one run iteration's aggregate rows run at the same time?

    Yes for a mixed pattern (``mixed_pattern``: fio randrw, vdbench rdpct, warp mixed) and
    for a host-level split (``per_host``: each host carried one op, the hosts run together).
    No otherwise: elbencho runs its phases (write, then read) one after another on every
    host, and fio's sections of a job file differ in job name and op. The rows' start and
    end times cannot tell: both tools record the run's, not each phase's.
    """
    if mixed_pattern(aggregate):
        return True
    rows = per_host[per_host["op"].isin(set(aggregate["op"]))]
    if rows.empty:
        return False
    ops_per_host = rows.groupby("host", sort=False)["op"].nunique()
    return bool((ops_per_host == 1).all() and rows["op"].nunique() > 1)


def concurrent_parts(rows: pd.DataFrame) -> pd.Series:
    """A label per row naming the part of its run it ran in, within its host and iteration.

    Rows of one job (clones '[3]' together) with a mixed pattern (``MIXED_PATTERNS``) ran
    together and get the job's name; any other op of a job is its own part ('job op'), since
    it may have run before or after the others (elbencho's phases, fio's stonewalled
    sections). Summing a host's rows of one part sums what it carried at one time.
    """
    if rows.empty:
        return pd.Series([], index=rows.index, dtype=object)
    jobs = [str(base_job(str(job))) if _present(job) else "" for job in rows["job"]]
    patterns = rows["rw"] if "rw" in rows else [None] * len(rows)
    labels = [
        job if _present(rw) and str(rw).lower() in MIXED_PATTERNS else f"{job} {op}".strip()
        for job, op, rw in zip(jobs, rows["op"], patterns, strict=True)
    ]
    return pd.Series(labels, index=rows.index, dtype=object)


def _op_order(op: str) -> tuple:
    return (0 if op == "read" else 1 if op == "write" else 2, op)


def _means_record(group: pd.DataFrame, per_host: pd.DataFrame, hosts_by_step: dict) -> dict:
    first = group.sort_values("iteration", kind="stable").iloc[0]
    step = first["step"]
    ops = str(first["op"]).split("+")
    runs = per_host[per_host["run_id"].isin(group["run_id"].unique())]
    names_of_op = sorted(set(runs.loc[runs["op"].isin(ops), "host"]), key=natural_key)
    run_hosts = sorted(set(runs["host"]), key=natural_key)
    step_hosts = list(hosts_by_step.get(step, []) if _present(step) else [])
    hosts = _first_present(
        group["hosts_in_run"].max(), len(step_hosts) or None, len(run_hosts) or None
    )
    bandwidth = stats.spread(group["bw_bytes_s"])
    iops = stats.spread(group["iops"])
    return {
        **_point_identity(first),
        "step": step,
        "hosts": hosts,
        "op_hosts": len(names_of_op) or hosts,
        "n": len(group),  # the values of the mean and sd: one per iteration of the run
        "bw_bytes_s_mean": bandwidth["mean"],
        "bw_bytes_s_sd": bandwidth["sd"],
        "iops_mean": iops["mean"],
        "iops_sd": iops["sd"],
        "_point_key": first["_point_key"],
        "_op_host_specs": _host_specs(names_of_op, step_hosts, hosts),
    }


def _first_present(*values):
    for value in values:
        if _present(value):
            return int(value)
    return None


def _host_specs(names: list[str], step_hosts: list[dict], hosts) -> list[dict] | None:
    """The {name, group} of the hosts that carried an op; None when they cannot be known."""
    groups = {str(host["name"]): host.get("group") for host in step_hosts}
    if names:
        return [{"name": name, "group": groups.get(name)} for name in names]
    if step_hosts:
        return [dict(host) for host in step_hosts]
    if _present(hosts):
        # Without host names a single link rate still gives the sum; a per-group one fails.
        return [{"name": f"host {index + 1}", "group": None} for index in range(int(hosts))]
    return None


def _sorted(table: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    order = table.assign(
        _point_order=table["point"].map(natural_key),
        _step_order=table["step"].map(lambda s: natural_key(s) if _present(s) else ()),
    )
    keys = [*keys, "hosts", "_step_order"]
    keys = [("_point_order" if key == "point" else key) for key in keys]
    order = order.sort_values(keys, kind="stable", na_position="last")
    return order.drop(columns=["_point_order", "_step_order"]).reset_index(drop=True)


# ---------------------------------------------------------------------------------------
# Slow hosts (constant stepping)


def slow_hosts(frame, percent: float) -> pd.DataFrame:
    """Each host's mean bandwidth per workload point and op against the median of all hosts.

    ``below_median_percent`` = 100 * (1 - host / median); ``flagged`` when it exceeds
    ``percent``. Uses the per-host rows; columns SLOW_HOST_COLUMNS.
    """
    rows = prepared(frame)
    per_host = rows[rows["host"] != ALL_HOSTS]
    records = []
    for _, point in per_host.groupby(_POINT_GROUP, sort=False, dropna=False):
        host_records = [
            _host_record(host_rows) for _, host_rows in point.groupby("host", sort=False)
        ]
        median = float(np.median([r["bw_bytes_s_mean"] for r in host_records]))
        for record in host_records:
            below = 100 * (1 - record["bw_bytes_s_mean"] / median) if median > 0 else math.nan
            record.update(
                median_bw_bytes_s=median,
                below_median_percent=below,
                flagged=bool(not math.isnan(below) and below > percent),
            )
        records += host_records
    table = pd.DataFrame.from_records(records, columns=list(SLOW_HOST_COLUMNS))
    table = table.astype(
        {
            **dict.fromkeys(("bs", "iodepth", "numjobs", "rwmixread", "n"), "Int64"),
            "flagged": bool,
            **dict.fromkeys(
                ("bw_bytes_s_mean", "iops_mean", "median_bw_bytes_s", "below_median_percent"),
                float,
            ),
        }
    )
    table = table.assign(_host_order=table["host"].map(natural_key))
    keys = ["target", "rw", "bs", "iodepth", "numjobs", "point", "job", "op", "_host_order"]
    table = table.sort_values(keys, kind="stable", na_position="last")
    return table.drop(columns="_host_order").reset_index(drop=True)


def _host_record(rows: pd.DataFrame) -> dict:
    """A host's means over its iterations (and jobs: clones of one job are summed first)."""
    first = rows.iloc[0]
    per_iteration = rows.groupby(["run_id", "iteration"], sort=False)[["bw_bytes_s", "iops"]].sum(
        min_count=1
    )
    steps = sorted({str(s) for s in rows["step"] if _present(s)}, key=natural_key)
    return {
        **_point_identity(first),
        "host": first["host"],
        "step": ", ".join(steps) or None,
        "n": len(per_iteration),
        "bw_bytes_s_mean": float(per_iteration["bw_bytes_s"].mean()),
        "iops_mean": float(per_iteration["iops"].mean()),
    }


# ---------------------------------------------------------------------------------------
# Start skew


def start_skew(frame, max_skew_s: float) -> pd.DataFrame:
    """Per (run_id, iteration) with more than one host: skew in seconds and whether it is flagged.

    The skew is the recorded ``start_skew_s``; without it, the spread of the host rows'
    ``start_time``. ``last_host`` is the host that started last (when host start times are
    known). ``flagged``: skew > ``max_skew_s``. Columns START_SKEW_COLUMNS.
    """
    rows = prepared(frame)
    records = []
    keys = ["experiment", "run_id", "iteration"]
    for _, group in _several_host_rows(rows, keys).groupby(keys, sort=False, dropna=False):
        record = _skew_record(group)
        if record["hosts"] is not None and record["hosts"] > 1:
            skew = record["start_skew_s"]
            record["flagged"] = bool(_present(skew) and skew > max_skew_s)
            records.append(record)
    table = pd.DataFrame.from_records(records, columns=list(START_SKEW_COLUMNS))
    table = table.astype(
        {"iteration": "Int64", "hosts": "Int64", "start_skew_s": float, "flagged": bool}
    )
    table = table.assign(_run_order=table["run_id"].map(natural_key))
    table = table.sort_values(["target", "_run_order", "iteration"], kind="stable")
    return table.drop(columns="_run_order").reset_index(drop=True)


def _several_host_rows(rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The rows of iterations that may have several hosts (a single-host sweep has none)."""
    groups = rows.groupby(keys, sort=False, dropna=False)
    declared = groups["hosts_in_run"].transform("max")
    named = rows["host"].where(rows["host"] != ALL_HOSTS)
    seen = named.groupby([rows[key] for key in keys], sort=False, dropna=False).transform("nunique")
    return rows[(declared.fillna(0) > 1) | (seen > 1)]


def _skew_record(group: pd.DataFrame) -> dict:
    first = group.iloc[0]
    per_host = group[group["host"] != ALL_HOSTS]
    host_names = set(per_host["host"])
    starts = _host_starts(per_host)
    recorded = group["start_skew_s"].dropna()
    if not recorded.empty:
        skew = float(recorded.max())
    elif len(starts) > 1:
        skew = (starts.max() - starts.min()).total_seconds()
    else:
        skew = math.nan
    return {
        "experiment": first["experiment"],
        "target": first["target"],
        "run_id": first["run_id"],
        "step": first["step"],
        "iteration": first["iteration"],
        "hosts": _first_present(group["hosts_in_run"].max(), len(host_names) or None),
        "start_skew_s": skew,
        "last_host": starts.idxmax() if len(starts) > 1 else None,
    }


def _host_starts(per_host: pd.DataFrame) -> pd.Series:
    """Earliest start time of each host (a host may have several job/op rows)."""
    if "start_time" not in per_host or per_host.empty:
        return pd.Series(dtype="datetime64[ns, UTC]")
    times = pd.to_datetime(per_host["start_time"], utc=True, format="ISO8601", errors="coerce")
    return times.groupby(per_host["host"]).min().dropna()


# ---------------------------------------------------------------------------------------
# Target sets


def target_table(frame) -> pd.DataFrame:
    """Each workload point on every target, and for a set run together ('a+b') the sum of
    the members run alone and together / sum. Columns TARGET_COLUMNS."""
    means = point_means(prepared(frame), {}).drop(columns="_op_host_specs")
    sums, ratios = [], []
    for _, row in means.iterrows():
        total = _sum_alone(means, row) if "+" in str(row["target"]) else math.nan
        sums.append(total)
        ratios.append(_ratio(row["bw_bytes_s_mean"], total))
    means = means.assign(sum_alone_bytes_s=sums, together_vs_sum=ratios)
    means = means.astype({"sum_alone_bytes_s": float, "together_vs_sum": float})
    # Members first, then the set they form: 'a', 'b', 'a+b'.
    means = means.assign(_target_order=means["target"].map(_target_order))
    keys = ["experiment", "rw", "bs", "iodepth", "numjobs", "_point_key", "op", "step"]
    means = means.sort_values([*keys, "_target_order"], kind="stable", na_position="last")
    return means[list(TARGET_COLUMNS)].reset_index(drop=True)


def _target_order(target) -> tuple:
    text = str(target) if _present(target) else ""
    return (text.count("+"), natural_key(text))


def _ratio(numerator, denominator) -> float:
    if not _present(denominator) or not denominator or not _present(numerator):
        return math.nan
    return float(numerator) / float(denominator)


def _step_text(step) -> str:
    return str(step) if _present(step) else ""


def _sum_alone(means: pd.DataFrame, row) -> float:
    """Sum of the members' bandwidth at the same point, op and step; NaN if one is missing."""
    step = _step_text(row["step"])
    same = means[
        (means["_point_key"] == row["_point_key"])
        & (means["op"] == row["op"])
        & (means["step"].map(_step_text) == step)
    ]
    total = 0.0
    for member in str(row["target"]).split("+"):
        alone = same.loc[same["target"] == member, "bw_bytes_s_mean"]
        if alone.empty:
            return math.nan
        total += float(alone.iloc[0])
    return total
