"""What the checks judge with: the read model over a run's evidence and what it stands on.

- :mod:`~conformance.judging.evidence`: the journal and the agent's events, read for the checks
  (attempts, retries and their waits, tool executions), in the chat-completions view
  (:mod:`~conformance.judging.canon`, :mod:`~conformance.judging.wire_reply`,
  :mod:`~conformance.judging.executions`);
- :mod:`~conformance.judging.timing` and :mod:`~conformance.judging.reaction`: the allowances a
  wait is judged with, the machine's and the agent's own;
- :mod:`~conformance.judging.deadlines`: how long a correct agent needs in a scenario;
- :mod:`~conformance.verdicts`: findings to verdicts, and their order.

The checks (``conformance.checks``) and the judge of a run (``conformance.run.judge``) stand on
these; nothing here runs an agent.
"""
