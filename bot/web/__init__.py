"""The web process: the Flask app, its state and its blueprints."""
