"""Language identification with models that ship inside their PyPI packages.

models.py    the identifiers: fastText lid.176 (default) and CLD2, loaded offline
"""
