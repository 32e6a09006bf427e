"""The node agent: runs one attempt's binary under supervision."""
