"""Alembic environment and versions: the one schema history of cachegate.

A package (not just a folder) so that it is installed next to ``semantic`` and
``gateway`` and ``semantic.store.upgrade_database`` can find it in a
non-editable install too.
"""
