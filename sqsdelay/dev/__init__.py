"""Local development: the embedded emulator, the demo, the parking simulation."""
