"""gpusched's client: the REST API from Python (`Client`) and the shell (`gpusched`)."""

from gpusched_client.client import ENDED, Client
from gpusched_client.errors import ApiError, PartlySubmitted, Unreachable, WaitTimeout

__all__ = ["ENDED", "ApiError", "Client", "PartlySubmitted", "Unreachable", "WaitTimeout"]
