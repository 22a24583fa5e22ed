"""Preloaded into the local engine's forkserver: its children, the workers, then ignore
SIGINT from their first instruction (the forkserver gives each child the handlers it had
before it started serving). Ctrl-C is the driver's to handle; it terminates the workers."""

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)
