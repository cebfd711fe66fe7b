"""A programmable fake OpenAI-compatible gateway that replays fault scenarios."""

from fakes.errors import FakesError, ScenarioError
from fakes.gateway import Gateway, Session, SyncGateway
from fakes.handles import GatewayHandle, SessionHandle
from fakes.retention import Retention
from fakes.scenario import Scenario, Step, load_scenario, load_scenarios

__all__ = [
    "FakesError",
    "ScenarioError",
    "Gateway",
    "Session",
    "SyncGateway",
    "GatewayHandle",
    "SessionHandle",
    "Retention",
    "Scenario",
    "Step",
    "load_scenario",
    "load_scenarios",
]
