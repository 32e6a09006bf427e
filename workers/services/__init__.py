"""Services of the fleet side: node registration, the attempt lifecycle, the reaper."""
