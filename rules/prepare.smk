# Preparation shared by experiments (S3 buckets) and the cleanup that undoes it.


rule prepare_bucket:
    output:
        marker=paths.bucket_marker(),
    log:
        paths.target_log("prepare_bucket.{bucket}.log"),
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
        paths.campaign_log("cleanup.log"),
    localrule: True
    conda:
        "../envs/storbench.yaml"
    params:
        spec=cleanup_spec_json,
    shell:
        "storbench cleanup --spec - > {log:q} 2>&1 <<'SPEC'\n{params.spec}\nSPEC"


# A client set-up step (setup:) on one host: a mount, a per-target attribute; undone by cleanup.
rule host_setup:
    output:
        marker=paths.setup_marker(),
    log:
        paths.campaign_log("setup/{step}/{host}.log"),
    wildcard_constraints:
        step=names_pattern(list(PLAN.campaign.setups)),
    localrule: True
    conda:
        "../envs/storbench.yaml"
    params:
        spec=setup_spec_json,
    shell:
        "storbench setup --spec - --output {output.marker:q} > {log:q} 2>&1"
        " <<'SPEC'\n{params.spec}\nSPEC"


# Host facts (kernel, CPU, memory, NICs, mount of the target, tool versions), once per campaign.
# Taken before the runs (their input), not on hosts while a run measures them; priority: before
# the renders too.
# The hosts of the experiments rule all runs, all at once in one job (a job per host kept the
# first run of 128 hosts waiting 12 s); rule telemetry below takes any other host.
if CAMPAIGN_HOSTS:

    rule telemetry_hosts:
        input:
            preflights=campaign_host_preflights,
        output:
            facts=[paths.telemetry(host) for host in CAMPAIGN_HOSTS],
        log:
            paths.campaign_log("telemetry.log"),
        priority: 10
        localrule: True
        conda:
            "../envs/storbench.yaml"
        params:
            spec=campaign_telemetry_spec_json,
        shell:
            "storbench telemetry-hosts --spec - > {log:q} 2>&1 <<'SPEC'\n{params.spec}\nSPEC"

    ruleorder: telemetry_hosts > telemetry


rule telemetry:
    input:
        preflight=host_preflights,
    output:
        facts=paths.telemetry(),
    log:
        paths.telemetry_log(),
    priority: 10
    localrule: True
    conda:
        "../envs/storbench.yaml"
    params:
        spec=telemetry_spec_json,
    shell:
        "storbench telemetry --spec - --output {output.facts:q} > {log:q} 2>&1"
        " <<'SPEC'\n{params.spec}\nSPEC"


# Tool services (fio --server) on every host of the campaign's service-mode experiments,
# started once and checked for readiness; stopped by `snakemake cleanup`, at the end of the
# workflow and on Ctrl-C. temp(): a later campaign starts them again.
# priority: beside preflight and telemetry, so that they are ready when the first run may go.
rule start_services:
    output:
        marker=temp(paths.services_marker()),
    log:
        paths.services_log(),
    priority: 10
    localrule: True
    conda:
        "../envs/storbench.yaml"
    params:
        spec=services_spec_json,
    shell:
        "storbench services start --spec - --output {output.marker:q} > {log:q} 2>&1"
        " <<'SPEC'\n{params.spec}\nSPEC"
