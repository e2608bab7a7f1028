"""The AWS side: the clients and the drivers that make the calls the core's flows ask for."""
