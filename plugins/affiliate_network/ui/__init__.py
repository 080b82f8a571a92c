"""The network page of the Airflow UI: what the DAGs wrote, read back for a person.

:mod:`~affiliate_network.ui.network_data` reads the output base (no Airflow, testable alone);
:mod:`~affiliate_network.ui.app` serves it on Airflow's API server with the auth manager's
checks; ``plugins/affiliate_network_ui_plugin.py`` registers both with Airflow.
"""
