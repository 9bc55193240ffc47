"""YAML -> typed model: validation with key paths, and the config sections' own checks."""
