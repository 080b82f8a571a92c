"""The backtest job: landed history decided by the rules as the on-hold review would, beside
what the network decided (:mod:`.job`), read from the landed partitions (:mod:`.landed`,
:mod:`.records`); the ``affiliate-network-rules`` command (:mod:`.cli`).
"""
