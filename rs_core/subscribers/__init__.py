"""Subscribers that make correct subscribers easy to write."""
