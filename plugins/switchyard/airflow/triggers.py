"""Triggers: waits that run in Airflow's triggerer instead of holding a worker slot."""
from __future__ import annotations

import asyncio
import os
from datetime import datetime, timezone
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent


class BatchReadyTrigger(BaseTrigger):
    """Fires when the batch's manifest exists, or when the deadline passes without it."""

    def __init__(self, manifest: str, deadline: str, poke_interval: float = 60.0):
        super().__init__()
        self.manifest = manifest
        self.deadline = deadline  # ISO timestamp, so the wait survives a triggerer restart
        self.poke_interval = poke_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("switchyard.airflow.triggers.BatchReadyTrigger",
                {"manifest": self.manifest, "deadline": self.deadline, "poke_interval": self.poke_interval})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deadline = datetime.fromisoformat(self.deadline)
        while True:
            if os.path.isfile(self.manifest):
                yield TriggerEvent({"status": "ready", "manifest": self.manifest})
                return
            remaining = (deadline - datetime.now(timezone.utc)).total_seconds()
            if remaining <= 0:
                yield TriggerEvent({"status": "timeout", "manifest": self.manifest})
                return
            await asyncio.sleep(min(self.poke_interval, remaining))
