"""A programmable fake OpenAI-compatible gateway that replays fault scenarios."""

from fakes.errors import FakesError, ScenarioError
from fakes.gateway import Gateway, Session, SyncGateway
from fakes.retention import Retention
from fakes.scenario import Scenario, Step, load_scenario, load_scenarios

__all__ = [
    "FakesError",
    "ScenarioError",
    "Gateway",
    "Session",
    "SyncGateway",
    "Retention",
    "Scenario",
    "Step",
    "load_scenario",
    "load_scenarios",
]
