"""The scheduler tick: load a snapshot, ask the pure policy, commit its decisions."""
