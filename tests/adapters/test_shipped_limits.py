"""The retry and timeout limits a shipped profile sets through the agent's own settings.

Each fake runs under the real profile (its argv, environment and files) and reads the setting
where the real agent reads it, so these tests prove the setting reaches the process; the fake
that honours it ends its turn where the default would have retried past any deadline.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from conformance.adapters.shipped import ShippedAdapter
from conformance.runner import run_scenario
from fakes import Scenario
from tests.adapters.fake_qwen import QWEN_ASK

# Qwen Code's documented values for an OpenAI-compatible provider
# (docs/users/configuration/model-providers.md of its repository).
QWEN_LIMITS = {"maxRetries": 3, "retryInitialDelayMs": 3000, "retryMaxDelayMs": 30000}

QWEN = (
    QWEN_ASK
    + """
# As Qwen Code: model.generationConfig of the user's settings bounds its rate-limit retries
# (10 when unset); the fallback model's own entry carries its own generationConfig.
user = json.load(open(os.path.join(os.environ["HOME"], ".qwen", "settings.json")))
gen = user.get("model", {}).get("generationConfig", {})
system = os.environ.get("QWEN_CODE_SYSTEM_SETTINGS_PATH")
fallback = {}
if system and os.path.exists(system):
    (fallback,) = json.load(open(system))["modelProviders"]["openai"]
print(json.dumps({"primary": gen, "fallback": fallback.get("generationConfig")}), file=sys.stderr)
for attempt in range(1 + gen.get("maxRetries", 10)):
    r = ask(os.environ["OPENAI_MODEL"])
    if r.status == 200:
        text = json.load(r)["choices"][0]["message"]["content"]
        print(json.dumps([{"type": "result", "is_error": False, "result": text}]))
        sys.exit(0)
print(json.dumps([{"type": "result", "is_error": True,
                   "error": {"message": f"API Error: {r.status} retries exhausted"}}]))
sys.exit(1)
"""
)

ALWAYS_429 = {
    "id": "limits-429",
    "title": "every attempt gets 429",
    "criteria": ["ERR-01"],
    "prompt": "Say hello.",
    "deadline": 20,
    "config": {"fallback_model": "conformance-fallback"},
    "capabilities": ["fallback_model"],
    "script": [{"times": 60, "fault": {"http_error": {"status": 429}}}],
}


def _qwen(tmp_path: Path) -> ShippedAdapter:
    path = tmp_path / "fake-qwen"
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(QWEN))
    path.chmod(0o755)
    return ShippedAdapter("qwen-code", bin_path=str(path))


def test_qwen_profile_sets_its_documented_retry_limits():
    (user,) = [f for f in ShippedAdapter("qwen-code").profile.files if f["root"] == "home"]
    assert user["json"]["model"]["generationConfig"] == QWEN_LIMITS


def test_qwen_retry_limits_reach_it_and_end_its_turn(tmp_path, gateway):
    entry, verdicts = run_scenario(gateway, _qwen(tmp_path), Scenario.from_dict(ALWAYS_429))
    assert entry["status"] == "ran", entry["agent_log"][-2000:]
    seen = entry["agent_log"].split("--- stderr ---\n", 1)[1].strip().splitlines()[0]
    assert f'"primary": {json.dumps(QWEN_LIMITS)}' in seen
    assert f'"fallback": {json.dumps(QWEN_LIMITS)}' in seen
    # 1 + maxRetries requests on the wire, then its error: the turn ended, judged.
    assert len(entry["journal"]["entries"]) == 1 + QWEN_LIMITS["maxRetries"]
    assert entry["events"][-1] == {**entry["events"][-1], "type": "turn_end", "reason": "error"}
    assert verdicts["ERR-01"]["verdict"] == "PASS", verdicts["ERR-01"]


def test_qwen_min_deadline_covers_its_retry_budget_at_those_limits():
    # Per rate-limit round: its SDK's 4 attempts (0.5, 1, 2 s) in each of 7 attempts 1.5 s
    # doubling to 30 s (+30 % jitter at most); 1 + maxRetries rounds, 3 s doubling between them.
    sdk = 0.5 + 1 + 2
    middle = sum(min(1.5 * 2**i, 30) for i in range(6)) * 1.3
    rounds = 1 + QWEN_LIMITS["maxRetries"]
    between = sum(min(3 * 2**i, 30) for i in range(QWEN_LIMITS["maxRetries"])) * 1.3
    budget = rounds * (7 * sdk + middle) + between
    assert 500 < budget <= ShippedAdapter("qwen-code").profile.min_deadline_s
