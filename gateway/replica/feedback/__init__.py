"""`POST /v1/feedback`: an app's score for one of its own requests (docs/QUALITY.md)."""
