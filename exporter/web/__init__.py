"""The HTTP layer: one FastAPI app (exporter.web.app.create_app) served by uvicorn."""
