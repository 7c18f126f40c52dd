"""Alembic migration scripts of the tuning database (run them with `tuning_db.migrate.upgrade`)."""
