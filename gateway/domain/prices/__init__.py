"""Prices apart from the rest of the domain: the config sections that set them
(`sections`) and the rates and token usage they price (`rates`)."""
