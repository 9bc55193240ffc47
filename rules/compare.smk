# Comparisons (config `compare:`): B against A per matched cell, in reports/compare/<name>/.
# compare_report always keeps the report; compare_check fails when a threshold is crossed.
COMPARISONS = {
    entry.name: entry for entry in storbench_config.comparisons(CAMPAIGN.raw)
}
# `rule all` builds each comparison's report and its check, which fails on a regression
COMPARISON_TARGETS = [
    f"reports/compare/{name}/{file}"
    for name in COMPARISONS
    for file in ("index.html", "passed.json")
]


rule compare_report:
    input:
        a=lambda wildcards: COMPARISONS[wildcards.comparison].a.summary,
        b=lambda wildcards: COMPARISONS[wildcards.comparison].b.summary,
    output:
        html=report(
            "reports/compare/{comparison}/index.html",
            caption="../templates/report/captions/compare.rst",
            category="comparisons",
            subcategory="{comparison}",
            labels={"comparison": "{comparison}", "item": "report"},
        ),
        csv=report(
            "reports/compare/{comparison}/comparison.csv",
            caption="../templates/report/captions/compare.rst",
            category="comparisons",
            subcategory="{comparison}",
            labels={"comparison": "{comparison}", "item": "change table"},
        ),
        markdown="reports/compare/{comparison}/comparison.md",
        unmatched="reports/compare/{comparison}/unmatched.csv",
        regressions="reports/compare/{comparison}/regressions.json",
    log:
        "results/logs/compare/{comparison}/report.log",
    wildcard_constraints:
        comparison=names_pattern(COMPARISONS),
    conda:
        "../envs/storbench.yaml"
    params:
        a_label=lambda wildcards: COMPARISONS[wildcards.comparison].a.source,
        b_label=lambda wildcards: COMPARISONS[wildcards.comparison].b.source,
        thresholds=lambda wildcards: [
            f"{metric}={limit}"
            for metric, limit in sorted(
                COMPARISONS[wildcards.comparison].thresholds.items()
            )
        ],
    shell:
        "storbench compare report {input.a:q} {input.b:q}"
        " --out-dir reports/compare/{wildcards.comparison}"
        " --a-label {params.a_label:q} --b-label {params.b_label:q}"
        " --threshold {params.thresholds:q} > {log:q} 2>&1"


rule compare_check:
    input:
        regressions="reports/compare/{comparison}/regressions.json",
    output:
        passed="reports/compare/{comparison}/passed.json",
    log:
        "results/logs/compare/{comparison}/check.log",
    wildcard_constraints:
        comparison=names_pattern(COMPARISONS),
    localrule: True
    conda:
        "../envs/storbench.yaml"
    shell:
        "storbench compare check {input.regressions:q} --output {output.passed:q}"
        " > {log:q} 2>&1"
