"""Reports: landing a day of conversions, the affiliate report, partition storage and schemas.

Runnable without Airflow's task context (the operators are thin adapters over it).
"""
