rule report_experiment:
    input:
        summary="results/{experiment}/summary.parquet",
        jobs=experiment_job_files,
        telemetry=experiment_telemetry,
    output:
        html=report(
            "reports/{experiment}/index.html",
            caption="../templates/report/captions/index.rst",
            category="{experiment}",
            labels={"item": "report"},
        ),
        csv=report(
            "reports/{experiment}/summary.csv",
            caption="../templates/report/captions/summary.rst",
            category="{experiment}",
            labels={"item": "summary table"},
        ),
        markdown="reports/{experiment}/summary.md",
        bandwidth=report(
            "reports/{experiment}/bandwidth.png",
            caption="../templates/report/captions/bandwidth.rst",
            category="{experiment}",
            labels={"item": "bandwidth"},
        ),
        iops=report(
            "reports/{experiment}/iops_vs_iodepth.png",
            caption="../templates/report/captions/iops.rst",
            category="{experiment}",
            labels={"item": "IOPS vs iodepth"},
        ),
        latency=report(
            "reports/{experiment}/latency_percentiles.png",
            caption="../templates/report/captions/latency.rst",
            category="{experiment}",
            labels={"item": "latency percentiles"},
        ),
        latency_cdf=report(
            "reports/{experiment}/latency_cdf.png",
            caption="../templates/report/captions/latency_cdf.rst",
            category="{experiment}",
            labels={"item": "latency CDF"},
        ),
        # Paper tables: the CSV in Snakemake's report, Markdown/LaTeX/HTML beside it. The
        # preparation-state table (tables/prep_state.*) exists only when runs record a state.
        bandwidth_table=report(
            "reports/{experiment}/tables/bandwidth.csv",
            caption="../templates/report/captions/bandwidth_table.rst",
            category="{experiment}",
            labels={"item": "bandwidth table"},
        ),
        bandwidth_formats=multiext(
            "reports/{experiment}/tables/bandwidth", ".md", ".tex", ".html"
        ),
        latency_table=report(
            "reports/{experiment}/tables/latency.csv",
            caption="../templates/report/captions/latency_table.rst",
            category="{experiment}",
            labels={"item": "latency table"},
        ),
        latency_formats=multiext(
            "reports/{experiment}/tables/latency", ".md", ".tex", ".html"
        ),
        per_host_table=report(
            "reports/{experiment}/tables/per_host.csv",
            caption="../templates/report/captions/per_host_table.rst",
            category="{experiment}",
            labels={"item": "per-node and system table"},
        ),
        per_host_formats=multiext(
            "reports/{experiment}/tables/per_host", ".md", ".tex", ".html"
        ),
    log:
        "results/{experiment}/logs/report.log",
    wildcard_constraints:
        experiment=GRID_PATTERN,
    conda:
        "../envs/storbench.yaml"
    params:
        meta=report_meta_json,
    shell:
        "storbench report --summary {input.summary:q} --out-dir reports/{wildcards.experiment}"
        " --meta {params.meta:q} --telemetry {input.telemetry:q} -- {input.jobs:q}"
        " > {log:q} 2>&1"


# `snakemake plan`: per run and host, the command lines and job files; touches no host.
rule plan:
    log:
        "results/logs/plan.log",
    localrule: True
    conda:
        "../envs/storbench.yaml"
    params:
        config=json.dumps(CAMPAIGN.raw, sort_keys=True),
    shell:
        "storbench plan --config-json {params.config:q} | tee {log:q}"
