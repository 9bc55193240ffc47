rule render_job:
    input:
        template=JOB_SOURCE,
    output:
        job=paths.job(),
    log:
        paths.log("render/{run_id}.{suffix}.log"),
    localrule: True
    conda:
        "../envs/storbench.yaml"
    params:
        spec=render_spec_json,
    shell:
        "storbench render --spec {params.spec:q} --output {output.job:q} > {log:q} 2>&1"


# A host's own job file: its directory, its read/write role, its host-fact values resolved.
rule render_host_job:
    input:
        template=JOB_SOURCE,
        facts=host_facts_file,
    output:
        job=paths.host_job(),
    log:
        paths.log("render/{run_id}/{host}.{suffix}.log"),
    localrule: True
    conda:
        "../envs/storbench.yaml"
    params:
        spec=render_host_spec_json,
        facts=facts_flag,
    shell:
        "storbench render --spec {params.spec:q} --output {output.job:q} {params.facts}"
        " > {log:q} 2>&1"


# Every host reachable, the tool installed, free space and clock offset, before any run.
rule preflight:
    input:
        # the target may be a mount a set-up step makes
        setup=probe_setup_markers,
    output:
        report=paths.preflight(),
    log:
        paths.log("preflight.log"),
    localrule: True
    conda:
        "../envs/storbench.yaml"
    params:
        spec=preflight_spec_json,
    shell:
        "storbench preflight --spec {params.spec:q} --output {output.report:q} > {log:q} 2>&1"


# One iteration on every host of the group; at most one per storage target at a time.
rule run_iteration:
    input:
        # job, bucket, services, preparation, before, setup, preflight
        unpack(run_inputs),
    output:
        manifest=paths.manifest(),
    log:
        paths.log("run/{run_id}.it{iteration}.log"),
    localrule: True
    conda:
        "../envs/storbench.yaml"
    resources:
        **target_locks(),
    params:
        spec=run_spec_json,
    shell:
        "storbench run --spec {params.spec:q} --iteration {wildcards.iteration}"
        " --job {input.job:q} --manifest {output.manifest:q} > {log:q} 2>&1"
