"""Alembic environment and versions: the one schema history of cachegate, and its
runner (:func:`migrations.runner.upgrade_database`).

A package (not just a folder) so that it is installed next to ``semantic`` and
``gateway`` and the runner finds ``env.py`` and ``versions/`` in a non-editable
install too.
"""
