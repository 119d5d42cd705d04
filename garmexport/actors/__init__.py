"""The thespian shells (each handler one delegation) and the composition root."""
