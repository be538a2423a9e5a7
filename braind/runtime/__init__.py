"""The daemon's lifecycle: wiring and start order, detaching, systemd notification, the per-root locks."""
