"""Schedules: the mapped schedule and which instances run first."""
