"""Find local model servers answering on their usual loopback ports (first run)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx


@dataclass(frozen=True)
class FoundServer:
    label: str
    port: int
    base_url: str
    models: tuple[str, ...]


async def _probe(client: httpx.AsyncClient, label: str, port: int) -> FoundServer | None:
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        response = await client.get(f"{base_url}/models")
        if response.status_code != 200:
            return None
        data = response.json().get("data", [])
        models = tuple(str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id"))
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return FoundServer(label, port, base_url, models)


async def find_local_servers(ports: dict[str, int], *, timeout_s: float = 0.6) -> list[FoundServer]:
    async with httpx.AsyncClient(timeout=timeout_s) as client:
        found = await asyncio.gather(*(_probe(client, label, port) for label, port in ports.items()))
    return [f for f in found if f]
