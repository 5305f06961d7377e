"""Adapters between Reactive Streams and other Python worlds, one module per world.

Import the module you need (``adapters.iterables``, ``adapters.async_iterables``,
``adapters.rx``, ``adapters.aioreactive``); this package imports none of them, so a missing
optional library only matters to the module that needs it.
"""
