# `snakemake network`: iperf3 from every client to the config's server, one client at a
# time and all at once; the report flags clients below min_fraction of the median.


rule network_check:
    output:
        parquet=paths.network_results(),
    log:
        paths.network_log("network.log"),
    localrule: True
    conda:
        "../envs/storbench.yaml"
    params:
        spec=network_spec_json,
        raw_dir=paths.network_raw_dir(),
    shell:
        "storbench network --spec - --out-dir {params.raw_dir:q}"
        " --parquet {output.parquet:q} --log {log:q} > {log:q} 2>&1"
        " <<'SPEC'\n{params.spec}\nSPEC"


rule network_report:
    input:
        parquet=paths.network_results(),
    output:
        html=report(
            paths.report_index("network"),
            caption="../templates/report/captions/network.rst",
            category="network",
            labels={"item": "network check"},
        ),
    log:
        paths.network_log("report.log"),
    conda:
        "../envs/storbench.yaml"
    params:
        min_fraction=network_min_fraction(),
        out_dir=lambda wildcards: paths.report_dir("network"),
    shell:
        "storbench network-report --parquet {input.parquet:q} --out-dir {params.out_dir:q}"
        " --min-fraction {params.min_fraction} > {log:q} 2>&1"


rule network:
    input:
        paths.report_index("network"),
