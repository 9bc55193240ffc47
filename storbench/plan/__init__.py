"""Model -> runs, stages and probes, and each step's spec (pure: touches no host)."""
