"""A loop's configuration: ``ralph.toml`` / ``[tool.ralph]`` / agent frontmatter, and the file's keys."""
