"""Steps that touch hosts: render, the run engine, preflight, telemetry, preparation, faults."""
