"""The async handle: ``async with Gateway()`` with an aiohttp client on the same loop."""

from __future__ import annotations

import json

import aiohttp
import pytest

from fakes import Gateway, ScenarioError


async def test_async_gateway_serves_and_journals():
    sc = {
        "id": "a",
        "criteria": ["STR-01"],
        "prompt": "p",
        "script": [
            {
                "match": {"stream": False},
                "reply": {"text": "hi"},
                "fault": {"stall": {"after_events": 0, "seconds": 10}},
            }
        ],
    }
    async with Gateway() as gw, aiohttp.ClientSession() as http:
        s = gw.create_session(sc, time_scale=0.002)
        async with http.post(
            s.base_url + "/chat/completions", json={"messages": [], "stream": False}
        ) as r:
            body = json.loads(await r.read())
        assert body["choices"][0]["message"]["content"] == "hi"
        e = s.journal()["entries"][0]
        assert e["fault"] == "stall"
        assert e["response"]["t_end_ns"] - e["response"]["t_headers_ns"] >= 20e6 * 0.9


async def test_invalid_dict_scenario_raises():
    async with Gateway() as gw:
        with pytest.raises(ScenarioError, match="required property"):
            gw.create_session({"id": "a"})
