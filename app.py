"""WSGI entry point for a WSGI server: ``granian --interface wsgi app:app`` (``spark serve`` runs granian)."""

from bot.web.app import create_app

app = create_app()
