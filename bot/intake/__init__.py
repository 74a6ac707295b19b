"""Webhook intake: signature check, delivery parsing, and the handler registry that turns events into jobs."""
