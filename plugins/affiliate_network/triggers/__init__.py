"""Triggers: waits for a shared resource that run in the triggerer, not in a worker slot.

The operators defer to them (``deferrable``) when a wait would last longer than a minute; the
granular reporting hour needs none of its own (its end is known: Airflow's ``DateTimeTrigger``).
"""
