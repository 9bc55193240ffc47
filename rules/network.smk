# `snakemake network`: iperf3 from every client to the config's server, one client at a
# time and all at once; the report flags clients below min_fraction of the median.


rule network_check:
    output:
        parquet="results/network/network.parquet",
    log:
        "results/network/logs/network.log",
    localrule: True
    conda:
        "../envs/storbench.yaml"
    params:
        spec=network_spec_json,
    shell:
        "storbench network --spec {params.spec:q} --out-dir results/network/raw"
        " --parquet {output.parquet:q} > {log:q} 2>&1"


rule network_report:
    input:
        parquet="results/network/network.parquet",
    output:
        html=report(
            "reports/network/index.html",
            caption="../templates/report/captions/network.rst",
            category="network",
            labels={"item": "network check"},
        ),
    log:
        "results/network/logs/report.log",
    conda:
        "../envs/storbench.yaml"
    params:
        min_fraction=network_min_fraction(),
    shell:
        "storbench network-report --parquet {input.parquet:q} --out-dir reports/network"
        " --min-fraction {params.min_fraction} > {log:q} 2>&1"


rule network:
    input:
        "reports/network/index.html",
