"""Alembic revisions; one file per schema change, never edited once released."""
