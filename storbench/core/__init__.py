"""The typed model and what every layer shares: paths, units, atomic writes, secrets, schema."""
