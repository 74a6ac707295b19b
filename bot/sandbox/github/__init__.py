"""A local GitHub speaking REST and GraphQL wire formats, for tests, the demo and benchmarks."""

from bot.sandbox.github.sandbox import GitHubSandbox

__all__ = ["GitHubSandbox"]
