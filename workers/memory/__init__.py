"""Everything Spark remembers per pull request in Redis, each module on its keys in ``bot.keys``."""
