"""What a campaign leaves behind, undone: tool services at the workflow's end, buckets, and the
client set-up steps (their undo commands)."""

from __future__ import annotations

import sys
from pathlib import Path

from storbench.core.model import Campaign, Host
from storbench.core.specs import CleanupSpec
from storbench.hosts import services, transport
from storbench.plan import specs
from storbench.run import s3
from storbench.run import setup as host_setup


def cleanup(spec: CleanupSpec | dict) -> list[str]:
    """`snakemake cleanup`: stop every service, empty and delete the S3 experiments' buckets,
    undo the set-up steps and close the persistent SSH connections."""
    spec = CleanupSpec.from_dict(spec)
    done = []
    for service in spec.services:
        services.stop_services(service["hosts"], service["tool"], service["port"])
        hosts = ", ".join(h["name"] for h in service["hosts"])
        done.append(f"{service['tool']} services stopped on {hosts}")
    if spec.buckets:
        for entry in spec.buckets:
            target = entry["target"]
            removed = s3.cleanup_buckets(target["name"], target, entry["buckets"])
            for bucket in entry["buckets"]:
                Path(s3.marker_path(target["name"], bucket)).unlink(missing_ok=True)
            listed = ", ".join(removed) or "(none)"
            done.append(f"target {target['name']}: removed buckets {listed}")
    done += host_setup.undo_setups(list(spec.setups))
    # last: the steps above use them
    done += transport.disconnect([Host.from_dict(host) for host in spec.connections])
    return done


def stop_campaign_services(campaign: Campaign) -> None:
    """At the end of the workflow (success or error): no service outlives the campaign."""
    for tool in specs.service_tools(campaign):
        if not services.maybe_running(tool):
            continue  # `snakemake plan` or a dry run touched no host and stops nothing
        spec = specs.service_spec(campaign, tool)
        try:
            services.stop_services(spec["hosts"], tool, spec["port"])
        except services.ServiceError as error:
            print(f"storbench: {error}; run `snakemake cleanup` again", file=sys.stderr)
