"""The cockpit's widgets, one per module."""
