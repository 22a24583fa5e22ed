"""Stages: one file each, found by name through `registry` without importing the others."""
