# Datasets and preconditioning recipes: every stage is its own job with an atomic marker
# under results/targets/<target>/, so a campaign killed mid-pass resumes at its chunk.


rule prepare_dataset:
    input:
        unpack(dataset_waits),
    output:
        marker=paths.dataset_marker(),
    log:
        paths.target_log("dataset.{dataset}.log"),
    localrule: True
    conda:
        "../envs/storbench.yaml"
    resources:
        **preparation_locks(),
    params:
        spec=dataset_spec_json,
        limits=dataset_limits,
    shell:
        "storbench prepare dataset --spec - --limits {params.limits:q}"
        " --output {output.marker:q} > {log:q} 2>&1"
        " <<'SPEC'\n{params.spec}\nSPEC"


# One purge, overwrite-pass chunk or SNIA round; stages run in recipe order.
rule precondition_stage:
    input:
        unpack(stage_waits),
        previous=previous_stage_marker,
    output:
        marker=paths.stage_marker(),
    log:
        paths.target_log("precondition.{recipe}.{stage}.log"),
    localrule: True
    conda:
        "../envs/storbench.yaml"
    resources:
        **preparation_locks(),
    params:
        spec=stage_spec_json,
        limits=recipe_limits,
    shell:
        "storbench prepare stage --spec - --limits {params.limits:q}"
        " --output {output.marker:q} > {log:q} 2>&1"
        " <<'SPEC'\n{params.spec}\nSPEC"


# Steady-state verdict, write cliffs, and the state token on every host.
rule precondition_prepared:
    input:
        stages=recipe_stage_markers,
    output:
        marker=paths.prepared_marker(),
    log:
        paths.target_log("precondition.{recipe}.prepared.log"),
    localrule: True
    conda:
        "../envs/storbench.yaml"
    resources:
        **preparation_locks(),
    params:
        spec=recipe_spec_json,
    shell:
        "storbench prepare finish --spec - --output {output.marker:q}"
        " --stages {input.stages:q} > {log:q} 2>&1"
        " <<'SPEC'\n{params.spec}\nSPEC"


# Wait for the write cache to flush, after the runs that measure before the flush.
rule precondition_flush:
    input:
        prepared=paths.prepared_marker(),
        before_flush=before_flush_runs,
    output:
        marker=paths.flushed_marker(),
    log:
        paths.target_log("precondition.{recipe}.flush.log"),
    localrule: True
    conda:
        "../envs/storbench.yaml"
    resources:
        **preparation_locks(),
    params:
        spec=recipe_spec_json,
        limits=recipe_limits,
    shell:
        "storbench prepare flush --spec - --limits {params.limits:q}"
        " --output {output.marker:q} > {log:q} 2>&1"
        " <<'SPEC'\n{params.spec}\nSPEC"


rule precondition_report:
    input:
        stages=recipe_stage_markers,
        prepared=paths.prepared_marker(),
        flushed=recipe_flushed_marker,
    output:
        html=report(
            f"{paths.recipe_report_dir()}/index.html",
            caption="../templates/report/captions/precondition.rst",
            category="preconditioning",
            subcategory="{target}",
            labels={"recipe": "{recipe}", "item": "report"},
        ),
    log:
        paths.target_log("precondition.{recipe}.report.log"),
    conda:
        "../envs/storbench.yaml"
    params:
        flushed=flushed_flag,
        out_dir=lambda wildcards: paths.recipe_report_dir(
            wildcards.target, wildcards.recipe
        ),
        units=PLAN.report_units,
    shell:
        "storbench prepare report --prepared {input.prepared:q} {params.flushed}"
        " --out-dir {params.out_dir:q} --units {params.units:q} --stages {input.stages:q}"
        " > {log:q} 2>&1"
