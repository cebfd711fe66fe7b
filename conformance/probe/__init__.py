"""``conformance probe``: check a live gateway's habits against what the reference agent relies on.

Theory of operation: a fixed, small list of chat requests (a short answer, a long reasoning
answer, a tool call, streamed and not; a history whose assistant turn carries only reasoning
plus an explanatory text; a rate-limit sample; a deliberately invalid request) is sent in order,
no more than ``--max-requests`` of them and no faster than ``--rate`` per second. Each answer is
kept as an *exchange*: status, headers, the body's raw chunks exactly as they arrived and how
the body ended. Observations are then pure functions of the exchanges, each with a verdict:

* ``OK``: the habit the reference agent relies on is there;
* ``MISSING``: a habit it relies on is missing (exit status 1);
* ``NOTE``: differs from OpenAI's own habit but the reference agent copes; reported for others;
* ``NOT_SEEN``: nothing in this probe showed it (no 429 came, no reasoning was sent, budget);
* ``NOT_APPLICABLE``: the dialect spoken (``--dialect``) has no counterpart of the habit.

The requests are written as chat completions and, for another dialect, rendered as the
reference agent renders them; the replies are read back into the chat view before they are
judged (``wire``). The API key is read from the environment, sent only in the dialect's
credential header and scrubbed from everything written; so are the values of the extra headers
and query parameters (``--header``, ``--header-env``, ``--query``) some gateways route by. ``--record`` saves the exchanges as a scenario of ``replay``
steps that makes the fake gateway send the same bytes again (contracts §1).

One job per module: ``probes`` what is sent, ``client`` sending it (budget, rate), ``exchange``
what came back, ``facts`` what the exchanges show, ``observations`` one function per habit and
its verdict, ``document`` the JSON report, ``record`` the replay scenario, ``redact`` keeping
the secrets out, ``wire`` each dialect's endpoint, bodies and read-back, ``cli`` the command
line.

``conformance probe failover`` judges a gateway's own retries and fallbacks instead (docs/probe.md,
"Failover"): ``failover_cases`` the policy and the cases, ``failover_config`` the gateway's config
from the policy, ``failover_command`` starting the gateway, ``failover`` running the cases,
``failover_judge`` the verdicts, ``failover_cli`` its command line.
"""

from conformance.probe.cli import execute, extras, main, parser
from conformance.probe.client import Probe
from conformance.probe.document import probe_document
from conformance.probe.exchange import Exchange, ProbeError
from conformance.probe.observations import OBSERVATIONS, VERDICTS, observe
from conformance.probe.probes import PROBES, ProbeRequest
from conformance.probe.record import FRAMING_HEADERS, recording

__all__ = [
    "OBSERVATIONS",
    "PROBES",
    "VERDICTS",
    "Exchange",
    "Probe",
    "ProbeError",
    "ProbeRequest",
    "execute",
    "extras",
    "main",
    "observe",
    "parser",
    "probe_document",
    "recording",
]

# The name this had when the probe was one module (the tests read it).
_FRAMING_HEADERS = FRAMING_HEADERS
