"""RQ job entry points and the long-lived worker runtime (imported only by worker processes)."""
