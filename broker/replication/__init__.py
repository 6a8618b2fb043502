"""Replica manager, follower fetchers, ISR, delayed operations."""
