"""The deployment's settings: the YAML files of ``include/`` and where files live.

``loader`` is the one reader of every YAML file (UTF-8 from ``textfile``, the alias and nesting
guard of ``yamlguard``, file, line and field in every error); ``models`` holds the models of
``network.yaml``, ``reports.yaml`` and ``notifications.yaml``; ``paths`` finds ``include/`` and
the data base. This file imports nothing, so the rules language can use the loader and
``paths`` without the models.
"""
