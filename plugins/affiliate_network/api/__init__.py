"""What the network's API defines, as data tables: the conversion record's fields
(``record_fields``), the aggregated report's columns (``report_columns``) and the timezone ids
(``timezones``).

Bottom floor: these modules import nothing of the package but ``exceptions``, and this file
imports nothing.
"""
