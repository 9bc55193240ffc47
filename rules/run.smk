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
        "storbench render --spec - --output {output.job:q} > {log:q} 2>&1"
        " <<'SPEC'\n{params.spec}\nSPEC"


# Every host's own job file of a run (its directory, its read/write role, its host-fact values
# resolved), all in one job: one per host made thousands of jobs at 128 hosts.
rule render_host_jobs:
    input:
        template=JOB_SOURCE,
        facts=run_host_facts_files,
    output:
        jobs=directory(paths.host_jobs()),
    log:
        paths.log("render/{run_id}.hosts.log"),
    wildcard_constraints:
        # not a standalone job file (jobs/<run_id>.fio): that is render_job's
        run_id=HOST_JOBS_RUN_ID,
    localrule: True
    conda:
        "../envs/storbench.yaml"
    params:
        spec=host_jobs_spec_json,
    shell:
        "storbench render-hosts --spec - --output-dir {output.jobs:q} > {log:q} 2>&1"
        " <<'SPEC'\n{params.spec}\nSPEC"


# Every host reachable, the tool installed, free space and clock offset, before any run.
# priority: before the job files, which the runs after the first need only later.
rule preflight:
    input:
        # the target may be a mount a set-up step makes
        setup=preflight_setup_markers,
    output:
        report=paths.preflight(),
    log:
        paths.log("preflight.log"),
    priority: 10
    localrule: True
    conda:
        "../envs/storbench.yaml"
    resources:
        **controller_port_locks(),
    params:
        spec=preflight_spec_json,
    shell:
        "storbench preflight --spec - --output {output.report:q} > {log:q} 2>&1"
        " <<'SPEC'\n{params.spec}\nSPEC"


# One iteration on every host of the group; at most one per storage target at a time.
# priority: a run starts once its own job file is ready; the other renders and the parses
# take the cores left while it runs (below telemetry's, taken before the runs).
rule run_iteration:
    input:
        # job, bucket, services, preparation, before, setup, preflight
        unpack(run_inputs),
    output:
        manifest=paths.manifest(),
    log:
        paths.run_log(),
    priority: 5
    localrule: True
    conda:
        "../envs/storbench.yaml"
    resources:
        **target_locks(),
        **controller_port_locks(),
    params:
        spec=run_spec_json,
        time_limit=run_time_limit,
    shell:
        "storbench run --spec - --iteration {wildcards.iteration}"
        " --timeout-s {params.time_limit} --job {input.job:q} --manifest {output.manifest:q}"
        " --log {log:q} > {log:q} 2>&1"
        " <<'SPEC'\n{params.spec}\nSPEC"
