rule parse_iteration:
    input:
        manifest="results/{experiment}/raw/{run_id}/it{iteration}/run.json",
    output:
        parsed="results/{experiment}/parsed/{run_id}/it{iteration}.parquet",
    log:
        "results/{experiment}/logs/parse/{run_id}.it{iteration}.log",
    conda:
        "../envs/storbench.yaml"
    shell:
        "storbench parse --manifest {input.manifest:q} --output {output.parsed:q}"
        " > {log:q} 2>&1"


rule gather_experiment:
    input:
        parsed=parsed_iterations,
    output:
        summary="results/{experiment}/summary.parquet",
    log:
        "results/{experiment}/logs/gather.log",
    conda:
        "../envs/storbench.yaml"
    shell:
        "storbench gather --output {output.summary:q} {input.parsed:q} > {log:q} 2>&1"
