"""The on-hold review job: pull a window's on-hold conversions, decide them, write the decisions.

The rules that decide are the language of :mod:`affiliate_network.rules` (a rules file in, one
decision per conversion out); this package runs it against the network, callable from a plain
script with a hook (no Airflow task context):

* :mod:`~affiliate_network.review.window` - the review window (days in the network's timezone);
* :mod:`~affiliate_network.review.traffic` - the pull and the incremental traffic snapshot the
  aggregates count over; :mod:`~affiliate_network.review.onhold_lookup` - the search by on-hold id;
* :mod:`~affiliate_network.review.job` - one run: pick the candidates (:mod:`.candidates`),
  decide, guard (:mod:`.guardrails`), apply under the write lease (:mod:`.apply`, :mod:`.lease`),
  audit (:mod:`.audit`);
* :mod:`.human_requests`, :mod:`.human_decisions`, :mod:`.human_apply` - the
  human step for ``review`` decisions;
* :mod:`~affiliate_network.review.options` and :mod:`~affiliate_network.review.rules_files` -
  what the operator checks at DAG parse time (light modules).
"""
