# Latency-SLO search: a chain of probe jobs p01..pNN; each decides its run from the markers
# before it, so an interrupted search resumes at its first missing probe.


rule search_probe:
    input:
        # earlier, before, setup, preflight, preparation
        unpack(probe_inputs),
    output:
        marker=paths.probe_marker(),
    log:
        paths.log("search/{probe}.log"),
    wildcard_constraints:
        experiment=SEARCH_PATTERN,
    localrule: True
    conda:
        "../envs/storbench.yaml"
    resources:
        **target_locks(),
        **controller_port_locks(),
    params:
        spec=search_spec_json,
        time_limit=search_time_limit,
    shell:
        "storbench search probe --spec - --probe {wildcards.probe}"
        " --timeout-s {params.time_limit} --output {output.marker:q}"
        " --markers {input.earlier:q} --log {log:q} > {log:q} 2>&1"
        " <<'SPEC'\n{params.spec}\nSPEC"


rule search_gather:
    input:
        markers=search_probe_markers,
    output:
        result=paths.search_result(),
        summary=paths.summary(),
        timeseries=paths.timeseries(),
    log:
        paths.log("search/gather.log"),
    wildcard_constraints:
        experiment=SEARCH_PATTERN,
    conda:
        "../envs/storbench.yaml"
    params:
        spec=search_spec_json,
    shell:
        "storbench search gather --spec - --output {output.result:q}"
        " --summary {output.summary:q} --timeseries {output.timeseries:q}"
        " --markers {input.markers:q} > {log:q} 2>&1"
        " <<'SPEC'\n{params.spec}\nSPEC"


rule search_report:
    input:
        result=paths.search_result(),
        summary=paths.summary(),
        preflight=experiment_report_preflight,
    output:
        html=report(
            paths.report_file("index.html", "{experiment}"),
            caption="../templates/report/captions/search.rst",
            category="{experiment}",
            labels={"item": "report"},
        ),
        probes=report(
            paths.report_file("probes.csv", "{experiment}"),
            caption="../templates/report/captions/search_probes.rst",
            category="{experiment}",
            labels={"item": "probes"},
        ),
        figure=report(
            paths.report_file("search.png", "{experiment}"),
            caption="../templates/report/captions/search_figure.rst",
            category="{experiment}",
            labels={"item": "offered vs achieved"},
        ),
    log:
        paths.log("search/report.log"),
    wildcard_constraints:
        experiment=SEARCH_PATTERN,
    conda:
        "../envs/storbench.yaml"
    params:
        meta=report_meta_json,
        out_dir=lambda wildcards: paths.report_dir(wildcards.experiment),
    shell:
        "storbench search report --result {input.result:q} --summary {input.summary:q}"
        " --meta {params.meta:q} --out-dir {params.out_dir:q} > {log:q} 2>&1"
