# Comparisons (config `compare:`): B against A per matched cell, in reports/compare/<name>/.
# compare_report always keeps the report; compare_check fails when a threshold is crossed.
COMPARISONS = {entry.name: entry for entry in config_compare.comparisons(CAMPAIGN.raw)}
# `rule all` builds each comparison's report and its check, which fails on a regression
COMPARISON_TARGETS = [
    f"{paths.compare_dir(name)}/{file}"
    for name in COMPARISONS
    for file in ("index.html", "passed.json")
]


rule compare_report:
    input:
        a=lambda wildcards: COMPARISONS[wildcards.comparison].a.summary,
        b=lambda wildcards: COMPARISONS[wildcards.comparison].b.summary,
    output:
        html=report(
            f"{paths.compare_dir()}/index.html",
            caption="../templates/report/captions/compare.rst",
            category="comparisons",
            subcategory="{comparison}",
            labels={"comparison": "{comparison}", "item": "report"},
        ),
        csv=report(
            f"{paths.compare_dir()}/comparison.csv",
            caption="../templates/report/captions/compare.rst",
            category="comparisons",
            subcategory="{comparison}",
            labels={"comparison": "{comparison}", "item": "change table"},
        ),
        markdown=f"{paths.compare_dir()}/comparison.md",
        unmatched=f"{paths.compare_dir()}/unmatched.csv",
        regressions=f"{paths.compare_dir()}/regressions.json",
    log:
        paths.campaign_log("compare/{comparison}/report.log"),
    wildcard_constraints:
        comparison=names_pattern(COMPARISONS),
    conda:
        "../envs/storbench.yaml"
    params:
        out_dir=lambda wildcards: paths.compare_dir(wildcards.comparison),
        a_label=lambda wildcards: COMPARISONS[wildcards.comparison].a.source,
        b_label=lambda wildcards: COMPARISONS[wildcards.comparison].b.source,
        thresholds=lambda wildcards: [
            f"{metric}={limit}"
            for metric, limit in sorted(
                COMPARISONS[wildcards.comparison].thresholds.items()
            )
        ],
        units=PLAN.report_units,
    shell:
        "storbench compare report {input.a:q} {input.b:q}"
        " --out-dir {params.out_dir:q} --units {params.units:q}"
        " --a-label {params.a_label:q} --b-label {params.b_label:q}"
        " --threshold {params.thresholds:q} > {log:q} 2>&1"


rule compare_check:
    input:
        regressions=f"{paths.compare_dir()}/regressions.json",
    output:
        passed=f"{paths.compare_dir()}/passed.json",
    log:
        paths.campaign_log("compare/{comparison}/check.log"),
    wildcard_constraints:
        comparison=names_pattern(COMPARISONS),
    localrule: True
    conda:
        "../envs/storbench.yaml"
    shell:
        "storbench compare check {input.regressions:q} --output {output.passed:q}"
        " > {log:q} 2>&1"
