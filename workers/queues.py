"""Queue names, from one place."""

SCHEDULER_QUEUE = "scheduler"


def node_queue(node_name: str) -> str:
    """Each GPU node's worker consumes only its own queue."""
    return f"node.{node_name}"
