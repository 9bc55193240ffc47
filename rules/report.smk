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
    log:
        "results/{experiment}/logs/report.log",
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
