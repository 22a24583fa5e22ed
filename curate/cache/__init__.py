"""The stage cache: stage outputs kept per partition, reused by a later run.

code.py    a stage's code, hashed (its module and the curate modules it imports)
"""
