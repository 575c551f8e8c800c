"""Patches to Serve's HTTP server in a replica's process: what Serve offers no option for."""
