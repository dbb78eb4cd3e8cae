"""Pipeline stages as small typed functions; ``flows`` wraps them as Prefect tasks."""
