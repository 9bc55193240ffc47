"""Raw outputs -> rows -> statistics: ingest, aggregation, steady state, scaling, faults, search."""
