# storbench: one YAML config -> rendered job files -> runs on client hosts -> Parquet -> reports.
# Results tree: results/[<campaign>/]<experiment>/{jobs,raw,parsed,logs}/ and summary.parquet; reports/[<campaign>/]<experiment>/
from snakemake.utils import min_version

min_version("9.0")

# The embedded demo is the default; --configfile replaces it instead of being merged into it.
if not config:

    configfile: "config/config.yaml"


report: "templates/report/workflow.rst"


include: "rules/common.smk"
include: "rules/prepare.smk"
include: "rules/precondition.smk"
include: "rules/run.smk"
include: "rules/parse.smk"
include: "rules/report.smk"
include: "rules/search.smk"
include: "rules/network.smk"
include: "rules/compare.smk"


onstart:
    start_campaign()


onsuccess:
    end_campaign()


onerror:
    end_campaign()


rule all:
    default_target: True
    input:
        final_reports(),
        finished_runs(),
        COMPARISON_TARGETS,
