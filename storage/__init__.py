"""Storage layer: SQLAlchemy models, engine factory, units of work and Alembic migrations."""
