# Latency-SLO search: a chain of probe jobs p01..pNN; each decides its run from the markers
# before it, so an interrupted search resumes at its first missing probe.


rule search_probe:
    input:
        earlier=earlier_probe_markers,
        # ancient: a repeated preflight must not make finished probes look outdated
        preflight=ancient("results/{experiment}/preflight.json"),
        preparation=experiment_preparation,
    output:
        marker="results/{experiment}/search/{probe}.json",
    log:
        "results/{experiment}/logs/search/{probe}.log",
    wildcard_constraints:
        experiment=SEARCH_PATTERN,
    localrule: True
    conda:
        "../envs/storbench.yaml"
    resources:
        **target_locks(),
    params:
        spec=search_spec_json,
    shell:
        "storbench search probe --spec {params.spec:q} --probe {wildcards.probe}"
        " --output {output.marker:q} --markers {input.earlier:q} > {log:q} 2>&1"


rule search_gather:
    input:
        markers=search_probe_markers,
    output:
        result="results/{experiment}/search.json",
        summary="results/{experiment}/summary.parquet",
        timeseries="results/{experiment}/timeseries.parquet",
    log:
        "results/{experiment}/logs/search/gather.log",
    wildcard_constraints:
        experiment=SEARCH_PATTERN,
    conda:
        "../envs/storbench.yaml"
    params:
        spec=search_spec_json,
    shell:
        "storbench search gather --spec {params.spec:q} --output {output.result:q}"
        " --summary {output.summary:q} --timeseries {output.timeseries:q}"
        " --markers {input.markers:q} > {log:q} 2>&1"


rule search_report:
    input:
        result="results/{experiment}/search.json",
        summary="results/{experiment}/summary.parquet",
    output:
        html=report(
            "reports/{experiment}/index.html",
            caption="../templates/report/captions/search.rst",
            category="{experiment}",
            labels={"item": "report"},
        ),
        probes=report(
            "reports/{experiment}/probes.csv",
            caption="../templates/report/captions/search_probes.rst",
            category="{experiment}",
            labels={"item": "probes"},
        ),
        figure=report(
            "reports/{experiment}/search.png",
            caption="../templates/report/captions/search_figure.rst",
            category="{experiment}",
            labels={"item": "offered vs achieved"},
        ),
    log:
        "results/{experiment}/logs/search/report.log",
    wildcard_constraints:
        experiment=SEARCH_PATTERN,
    conda:
        "../envs/storbench.yaml"
    params:
        meta=report_meta_json,
    shell:
        "storbench search report --result {input.result:q} --summary {input.summary:q}"
        " --meta {params.meta:q} --out-dir reports/{wildcards.experiment} > {log:q} 2>&1"
