"""Discrete-event simulator in virtual time that drives any scheduling policy (no Django)."""

from .engine import Simulator
from .model import NodeSpec, SimJob, build_fleet, default_tiers

__all__ = ["NodeSpec", "SimJob", "Simulator", "build_fleet", "default_tiers"]
