"""The demo runner of a checkout (``python -m demo``): a sandbox, then the provider's DAGs.

It imports the provider, Airflow and the sandbox, so it belongs to neither distribution: it
lives in the repository, run from its root with the development environment (which has both).
"""
