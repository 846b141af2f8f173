"""Legality: exact checks of new schedules, with witnesses."""
