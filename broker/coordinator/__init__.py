"""Group and transaction coordinators."""
