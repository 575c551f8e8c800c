"""Waiting and cancelling in asyncio without the traps of the standard library."""
