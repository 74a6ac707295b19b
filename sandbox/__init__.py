"""Local stand-ins for GitHub (`sandbox.github`) and Cerebras, for tests, benchmarks and `spark demo`."""
