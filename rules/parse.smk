rule parse_iteration:
    input:
        manifest="results/{experiment}/raw/{run_id}/it{iteration}/run.json",
    output:
        parsed="results/{experiment}/parsed/{run_id}/it{iteration}.parquet",
        timeseries="results/{experiment}/parsed/{run_id}/it{iteration}.timeseries.parquet",
    log:
        "results/{experiment}/logs/parse/{run_id}.it{iteration}.log",
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
        summary="results/{experiment}/summary.parquet",
        timeseries="results/{experiment}/timeseries.parquet",
    log:
        "results/{experiment}/logs/gather.log",
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
        step="results/{experiment}/steps/{step}.parquet",
    log:
        "results/{experiment}/logs/gather_step.{step}.log",
    conda:
        "../envs/storbench.yaml"
    shell:
        "storbench gather --output {output.step:q} {input.parsed:q} > {log:q} 2>&1"
