import shlex


rule report_experiment:
    input:
        summary=paths.summary(),
        timeseries=paths.timeseries(),
        jobs=experiment_job_files,
        telemetry=experiment_telemetry,
        manifests=experiment_fault_manifests,
        preflight=experiment_report_preflight,
    output:
        html=report(
            paths.report_file("index.html", "{experiment}"),
            caption="../templates/report/captions/index.rst",
            category="{experiment}",
            labels={"item": "report"},
        ),
        csv=report(
            paths.report_file("summary.csv", "{experiment}"),
            caption="../templates/report/captions/summary.rst",
            category="{experiment}",
            labels={"item": "summary table"},
        ),
        markdown=paths.report_file("summary.md", "{experiment}"),
        bandwidth=report(
            paths.report_file("bandwidth.png", "{experiment}"),
            caption="../templates/report/captions/bandwidth.rst",
            category="{experiment}",
            labels={"item": "bandwidth"},
        ),
        iops=report(
            paths.report_file("iops_vs_iodepth.png", "{experiment}"),
            caption="../templates/report/captions/iops.rst",
            category="{experiment}",
            labels={"item": "IOPS vs iodepth"},
        ),
        latency=report(
            paths.report_file("latency_percentiles.png", "{experiment}"),
            caption="../templates/report/captions/latency.rst",
            category="{experiment}",
            labels={"item": "latency percentiles"},
        ),
        latency_cdf=report(
            paths.report_file("latency_cdf.png", "{experiment}"),
            caption="../templates/report/captions/latency_cdf.rst",
            category="{experiment}",
            labels={"item": "latency CDF"},
        ),
        latency_vs_iops=report(
            paths.report_file("latency_vs_iops.png", "{experiment}"),
            caption="../templates/report/captions/latency_vs_iops.rst",
            category="{experiment}",
            labels={"item": "latency vs IOPS"},
        ),
        timeseries=report(
            paths.report_file("timeseries.png", "{experiment}"),
            caption="../templates/report/captions/timeseries.rst",
            category="{experiment}",
            labels={"item": "per-interval series"},
        ),
        per_host=report(
            paths.report_file("per_host.png", "{experiment}"),
            caption="../templates/report/captions/per_host.rst",
            category="{experiment}",
            labels={"item": "per-host bandwidth"},
        ),
        # Paper tables: the CSV in Snakemake's report, Markdown/LaTeX/HTML beside it. The
        # preparation-state table (tables/prep_state.*) exists only when runs record a state.
        bandwidth_table=report(
            paths.report_file("tables/bandwidth.csv", "{experiment}"),
            caption="../templates/report/captions/bandwidth_table.rst",
            category="{experiment}",
            labels={"item": "bandwidth table"},
        ),
        bandwidth_formats=multiext(
            paths.report_file("tables/bandwidth", "{experiment}"),
            ".md",
            ".tex",
            ".html",
        ),
        latency_table=report(
            paths.report_file("tables/latency.csv", "{experiment}"),
            caption="../templates/report/captions/latency_table.rst",
            category="{experiment}",
            labels={"item": "latency table"},
        ),
        latency_formats=multiext(
            paths.report_file("tables/latency", "{experiment}"), ".md", ".tex", ".html"
        ),
        per_host_table=report(
            paths.report_file("tables/per_host.csv", "{experiment}"),
            caption="../templates/report/captions/per_host_table.rst",
            category="{experiment}",
            labels={"item": "per-node and system table"},
        ),
        per_host_formats=multiext(
            paths.report_file("tables/per_host", "{experiment}"),
            ".md",
            ".tex",
            ".html",
        ),
    log:
        paths.log("report.log"),
    wildcard_constraints:
        experiment=GRID_PATTERN,
    conda:
        "../envs/storbench.yaml"
    # One thread, so the campaign report is built beside it: its figures are drawn by a pool
    # of FIGURE_WORKERS processes (storbench.report.drawing) for about a second of its time.
    threads: 1
    params:
        workers=FIGURE_WORKERS,
        meta=report_meta_json,
        out_dir=lambda wildcards: paths.report_dir(wildcards.experiment),
        figure_cache=lambda wildcards: paths.figure_cache(wildcards.experiment),
    shell:
        "storbench report --summary {input.summary:q} --out-dir {params.out_dir:q}"
        " --figure-cache {params.figure_cache:q} --workers {params.workers}"
        " --meta {params.meta:q} --timeseries {input.timeseries:q}"
        " --telemetry {input.telemetry:q} --manifests {input.manifests:q}"
        " -- {input.jobs:q}"
        " > {log:q} 2>&1"


rule campaign_report:
    input:
        summaries=campaign_grid_summaries,
        searches=campaign_search_results,
        telemetry=campaign_telemetry,
        preflights=campaign_report_preflights,
    output:
        html=report(
            paths.report_file("index.html", CAMPAIGN_REPORT),
            caption="../templates/report/captions/campaign.rst",
            category="campaign",
            labels={"item": "campaign report"},
        ),
        key_results=report(
            paths.report_file("tables/key_results.csv", CAMPAIGN_REPORT),
            caption="../templates/report/captions/key_results.rst",
            category="campaign",
            labels={"item": "key results"},
        ),
        key_results_formats=multiext(
            paths.report_file("tables/key_results", CAMPAIGN_REPORT),
            ".md",
            ".tex",
            ".html",
        ),
        peaks=report(
            paths.report_file("peaks.png", CAMPAIGN_REPORT),
            caption="../templates/report/captions/peaks.rst",
            category="campaign",
            labels={"item": "peaks per experiment"},
        ),
    log:
        paths.campaign_log("campaign_report.log"),
    conda:
        "../envs/storbench.yaml"
    params:
        meta=campaign_meta_json,
        out_dir=lambda wildcards, output: os.path.dirname(output.html),
    shell:
        "storbench campaign-report --meta {params.meta:q} --out-dir {params.out_dir:q}"
        " --summaries {input.summaries:q} --searches {input.searches:q}"
        " --telemetry {input.telemetry:q} > {log:q} 2>&1"


# The reports rule all asks for, printed at the end by one headless Chromium: the same pages,
# for a customer deliverable.
PRINTED_REPORTS = [*CAMPAIGN.default_experiments, CAMPAIGN_REPORT]


rule report_pdfs:
    input:
        html=[paths.report_index(name) for name in PRINTED_REPORTS],
    output:
        pdfs=[
            report(
                paths.report_pdf(name),
                caption="../templates/report/captions/pdf.rst",
                category=name,
                labels={"item": "PDF"},
            )
            for name in PRINTED_REPORTS
        ],
    log:
        paths.campaign_log("pdf/reports.log"),
    conda:
        "../envs/storbench.yaml"
    params:
        # `--html page --pdf file` of each report, shell-quoted
        pages=lambda wildcards, input, output: " ".join(
            f"--html {shlex.quote(html)} --pdf {shlex.quote(pdf)}"
            for html, pdf in zip(input.html, output.pdfs, strict=True)
        ),
    shell:
        "storbench pdf {params.pages} > {log:q} 2>&1"


# Another experiment's report, asked for by name (reports/<experiment>/report.pdf).
rule report_pdf:
    input:
        html=paths.report_index(),
    output:
        pdf=report(
            paths.report_pdf(),
            caption="../templates/report/captions/pdf.rst",
            category="{report}",
            labels={"item": "PDF"},
        ),
    log:
        paths.campaign_log("pdf/{report}.log"),
    wildcard_constraints:
        report=names_pattern([n for n in EXPERIMENTS if n not in PRINTED_REPORTS]),
    conda:
        "../envs/storbench.yaml"
    shell:
        "storbench pdf --html {input.html:q} --pdf {output.pdf:q} > {log:q} 2>&1"


# `snakemake plan`: per run and host, the command lines and job files; touches no host.
rule plan:
    log:
        paths.campaign_log("plan.log"),
    localrule: True
    conda:
        "../envs/storbench.yaml"
    params:
        # a function: a string param is formatted with wildcards, and "{n}" in a config is none
        config=lambda wildcards: json.dumps(CAMPAIGN.raw, sort_keys=True),
    shell:
        "storbench plan --config-json {params.config:q} | tee {log:q}"
