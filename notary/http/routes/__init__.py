"""HTTP route modules of the notary application, each adding its routes to an app."""
