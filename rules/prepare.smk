# Preparation shared by experiments (S3 buckets) and the cleanup that undoes it.


rule prepare_bucket:
    output:
        marker="results/targets/{target}/buckets/{bucket}.json",
    log:
        "results/targets/{target}/logs/prepare_bucket.{bucket}.log",
    localrule: True
    conda:
        "../envs/storbench.yaml"
    params:
        target=s3_target_json,
    shell:
        "storbench prepare-bucket --target {params.target:q} --bucket {wildcards.bucket:q}"
        " --marker {output.marker:q} > {log:q} 2>&1"


# `snakemake cleanup`: remove the buckets of every S3 experiment and their markers.
rule cleanup:
    log:
        "results/logs/cleanup.log",
    localrule: True
    conda:
        "../envs/storbench.yaml"
    params:
        spec=cleanup_spec_json(),
    shell:
        "storbench cleanup --spec {params.spec:q} > {log:q} 2>&1"
