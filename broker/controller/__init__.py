"""Metadata records and image, broker registration, partition leadership."""
