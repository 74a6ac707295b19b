"""WSGI entry point for gunicorn: ``gunicorn app:app``."""

from bot.web import create_app

app = create_app()
