"""Adapters between Reactive Streams and other Python worlds, one module per world.

Import the module you need from ``reactive_streams.adapters``: ``iterables``,
``async_iterables``, ``rx`` or ``aioreactive``; this package imports none of them, so a missing
optional library only matters to the module that needs it.
"""
