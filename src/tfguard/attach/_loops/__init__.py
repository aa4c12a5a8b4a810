"""Hand-written training loops under `tfguard run`: recorded at their optimizer's updates (see `recorder`)."""
