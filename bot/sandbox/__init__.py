"""Local stand-ins for GitHub (`bot.sandbox.github`) and Cerebras, used by tests, benchmarks and `spark demo`."""
