"""The only code that talks to the Docker engine (through the `docker` package)."""
