"""Engines schedule stages over partitions; they know nothing of any particular stage."""
