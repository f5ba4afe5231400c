"""The cockpit's screens: launch, live dashboard, summary, sessions, replay, help."""
