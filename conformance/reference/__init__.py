"""The reference agent: a sans-IO recovery core and its drivers. Knows nothing of the harness."""

from .agent import HELLO, Behaviours, run_protocol

__all__ = ["HELLO", "Behaviours", "run_protocol"]
