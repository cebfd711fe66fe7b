"""One scenario's run, in three steps with typed seams between them.

- :mod:`conformance.run.gate` (pure): whether the agent can be run on the scenario at all, and
  if not, why (an undeclared capability, a dialect it does not speak, config or a history it
  cannot be given).
- :mod:`conformance.run.drive` (IO): the agent's turn against a gateway session; returns a
  :class:`~conformance.run.drive.Drive`, the record of what happened (journal, events, log,
  debug files, how the turn ended), nothing judged.
- :mod:`conformance.run.judge` (pure): a drive's record and the gate's word to each criterion's
  verdict, by an ordered table of rules (the first that applies decides).

``conformance.runner`` composes them into ``run_scenario`` and writes the results entry;
``conformance.rejudge`` runs the judge alone on a results file's saved records.
"""
