"""The repository index: the local store, archives read into it, and lookups of definitions and references."""
