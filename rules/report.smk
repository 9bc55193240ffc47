rule report_experiment:
    input:
        summary="results/{experiment}/summary.parquet",
        timeseries="results/{experiment}/timeseries.parquet",
        jobs=experiment_job_files,
        telemetry=experiment_telemetry,
        manifests=experiment_fault_manifests,
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
        latency_vs_iops=report(
            "reports/{experiment}/latency_vs_iops.png",
            caption="../templates/report/captions/latency_vs_iops.rst",
            category="{experiment}",
            labels={"item": "latency vs IOPS"},
        ),
        timeseries=report(
            "reports/{experiment}/timeseries.png",
            caption="../templates/report/captions/timeseries.rst",
            category="{experiment}",
            labels={"item": "per-interval series"},
        ),
        per_host=report(
            "reports/{experiment}/per_host.png",
            caption="../templates/report/captions/per_host.rst",
            category="{experiment}",
            labels={"item": "per-host bandwidth"},
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
        " --meta {params.meta:q} --timeseries {input.timeseries:q}"
        " --telemetry {input.telemetry:q} --manifests {input.manifests:q}"
        " -- {input.jobs:q}"
        " > {log:q} 2>&1"


rule campaign_report:
    input:
        summaries=campaign_grid_summaries,
        searches=campaign_search_results,
        experiment_reports=campaign_experiment_reports,
        telemetry=campaign_telemetry,
    output:
        html=report(
            f"reports/{CAMPAIGN_REPORT}/index.html",
            caption="../templates/report/captions/campaign.rst",
            category="campaign",
            labels={"item": "campaign report"},
        ),
        key_results=report(
            f"reports/{CAMPAIGN_REPORT}/tables/key_results.csv",
            caption="../templates/report/captions/key_results.rst",
            category="campaign",
            labels={"item": "key results"},
        ),
        key_results_formats=multiext(
            f"reports/{CAMPAIGN_REPORT}/tables/key_results", ".md", ".tex", ".html"
        ),
        peaks=report(
            f"reports/{CAMPAIGN_REPORT}/peaks.png",
            caption="../templates/report/captions/peaks.rst",
            category="campaign",
            labels={"item": "peaks per experiment"},
        ),
    log:
        "results/logs/campaign_report.log",
    conda:
        "../envs/storbench.yaml"
    params:
        meta=campaign_meta_json(),
        out_dir=lambda wildcards, output: os.path.dirname(output.html),
    shell:
        "storbench campaign-report --meta {params.meta:q} --out-dir {params.out_dir:q}"
        " --summaries {input.summaries:q} --searches {input.searches:q}"
        " --telemetry {input.telemetry:q} > {log:q} 2>&1"


# A report printed by headless Chromium: the same page, for a customer deliverable.
rule report_pdf:
    input:
        html="reports/{report}/index.html",
    output:
        pdf=report(
            "reports/{report}/report.pdf",
            caption="../templates/report/captions/pdf.rst",
            category="{report}",
            labels={"item": "PDF"},
        ),
    log:
        "results/logs/pdf/{report}.log",
    wildcard_constraints:
        report=names_pattern([*EXPERIMENTS, CAMPAIGN_REPORT]),
    conda:
        "../envs/storbench.yaml"
    shell:
        "storbench pdf --html {input.html:q} --pdf {output.pdf:q} > {log:q} 2>&1"


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
