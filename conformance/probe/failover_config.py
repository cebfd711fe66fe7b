"""The gateway under test's configuration, written from the failover :class:`Policy`.

One writer per kind of gateway; each maps the policy onto the gateway's own settings and says in
its docstring what cannot be mapped. ``routes`` maps a case id to its two upstreams' base URLs
(each a fake gateway session of its own, so no case's failures cool down another's upstream).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml

from conformance.probe.failover_cases import Policy

__all__ = ["Route", "litellm_config", "portkey_config", "proxy_config"]


@dataclass(frozen=True)
class Route:
    primary: str
    secondary: str


def litellm_config(policy: Policy, routes: dict[str, Route], master_key_env: str) -> str:
    """LiteLLM proxy ``config.yaml``: per case a model group ``<case>`` on the primary and
    ``<case>-secondary`` on the secondary; router ``num_retries`` = ``retries``, ``fallbacks``
    from each group to its secondary, ``timeout`` and ``stream_timeout`` = ``timeout_s`` per
    deployment. The OpenAI client's own retries are off (``max_retries: 0``) so every retry
    seen is the router's. LiteLLM has no per-status lists for ``num_retries`` and ``fallbacks``
    (it decides by exception type) and no switch for Retry-After: ``retry_on``,
    ``fallback_on`` and ``honour_retry_after`` are not expressed."""

    def deployment(name: str, url: str) -> dict[str, Any]:
        return {
            "model_name": name,
            "litellm_params": {
                "model": "openai/fake-model",
                "api_base": url,
                "api_key": "upstream-placeholder",
                "max_retries": 0,
                "timeout": policy.timeout_s,
                "stream_timeout": policy.timeout_s,
            },
        }

    models = []
    for case, r in routes.items():
        models.append(deployment(case, r.primary))
        if policy.fallback:
            models.append(deployment(f"{case}-secondary", r.secondary))
    router: dict[str, Any] = {"num_retries": policy.retries, "timeout": policy.timeout_s}
    if policy.fallback:
        router["fallbacks"] = [{case: [f"{case}-secondary"]} for case in routes]
    cfg = {
        "model_list": models,
        "router_settings": router,
        "litellm_settings": {"num_retries": policy.retries, "telemetry": False},
        "general_settings": {"master_key": f"os.environ/{master_key_env}"},
    }
    return yaml.safe_dump(cfg, sort_keys=False)


def portkey_config(policy: Policy, route: Route, api_key: str, provider: str = "openai") -> str:
    """Portkey gateway config (the ``x-portkey-config`` header's JSON): a ``fallback`` strategy
    over the two upstreams (``on_status_codes`` = ``fallback_on``), each target with
    ``retry: {attempts: retries, on_status_codes: retry_on, use_retry_after_header}`` and
    ``request_timeout`` = ``timeout_s`` in ms."""

    def target(url: str) -> dict[str, Any]:
        return {
            "provider": provider,
            "api_key": api_key,
            "custom_host": url,
            "retry": {
                "attempts": policy.retries,
                "on_status_codes": list(policy.retry_on),
                "use_retry_after_header": policy.honour_retry_after,
            },
            "request_timeout": int(policy.timeout_s * 1000),
        }

    targets = [target(route.primary)]
    if policy.fallback:
        targets.append(target(route.secondary))
    cfg = {
        "strategy": {"mode": "fallback", "on_status_codes": list(policy.fallback_on)},
        "targets": targets,
    }
    return json.dumps(cfg)


def proxy_config(policy: Policy, routes: dict[str, Route]) -> str:
    """The test proxy's JSON config (``tests/failover_proxy.py``): the policy as it is, and per
    case (the request's model) its two upstreams."""
    return json.dumps(
        {
            "policy": policy.as_dict(),
            "routes": {c: [r.primary, r.secondary] for c, r in routes.items()},
        },
        indent=2,
    )
