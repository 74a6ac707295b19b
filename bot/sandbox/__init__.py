"""Local stand-ins for GitHub (`bot.sandbox.github`) and Cerebras, for tests, benchmarks and `spark demo`."""
