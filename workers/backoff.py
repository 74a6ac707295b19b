"""Crash-loop back-off: a worker process that keeps dying right after it starts is restarted ever more slowly.

A worker that dies within ``QUICK_DEATH_SECONDS`` of its start (Redis unreachable, a broken deployment) is
restarted after a pause that doubles with each such death in a row; after ``MAX_QUICK_DEATHS`` the
supervisor gives up, so the failure shows (exit status 1) instead of a tight restart loop. RQ's
``WorkerPool`` restarts a dead worker at once, every time.
"""

from __future__ import annotations

from dataclasses import dataclass

QUICK_DEATH_SECONDS = 10.0
MAX_QUICK_DEATHS = 5
RESTART_PAUSE_SECONDS = 0.25
MAX_RESTART_PAUSE_SECONDS = 8.0


@dataclass
class CrashBackoff:
    """One worker slot's quick deaths in a row (a replacement inherits the streak of the one it replaces)."""

    quick_deaths: int = 0

    def after_death(self, lived: float) -> float | None:
        """Count a death after ``lived`` seconds; return the pause before the restart, or None to give up."""
        self.quick_deaths = self.quick_deaths + 1 if lived < QUICK_DEATH_SECONDS else 0
        if self.quick_deaths >= MAX_QUICK_DEATHS:
            return None
        return min(RESTART_PAUSE_SECONDS * 2.0**self.quick_deaths, MAX_RESTART_PAUSE_SECONDS)
