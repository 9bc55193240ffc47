rule parse_iteration:
    input:
        manifest=paths.manifest(),
    output:
        parsed=paths.parsed(),
        timeseries=paths.parsed_timeseries(),
    log:
        paths.log("parse/{run_id}.it{iteration}.log"),
    conda:
        "../envs/storbench.yaml"
    shell:
        "storbench parse --manifest {input.manifest:q} --output {output.parsed:q}"
        " --timeseries {output.timeseries:q} > {log:q} 2>&1"


rule gather_experiment:
    input:
        parsed=parsed_iterations,
        timeseries=parsed_timeseries,
    output:
        summary=paths.summary(),
        timeseries=paths.timeseries(),
    log:
        paths.log("gather.log"),
    wildcard_constraints:
        experiment=GRID_PATTERN,
    conda:
        "../envs/storbench.yaml"
    shell:
        "storbench gather --output {output.summary:q} --timeseries {output.timeseries:q}"
        " {input.parsed:q} {input.timeseries:q} > {log:q} 2>&1"


# `snakemake results/<experiment>/steps/h4.parquet`: one client step of a stepped experiment.
rule gather_step:
    input:
        parsed=step_iterations,
    output:
        step=paths.step_summary(),
    log:
        paths.log("gather_step.{step}.log"),
    conda:
        "../envs/storbench.yaml"
    shell:
        "storbench gather --output {output.step:q} {input.parsed:q} > {log:q} 2>&1"
