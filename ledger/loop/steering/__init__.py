"""A person steering a loop: the commands (pause, resume, steer, unblock, stop) and the state read from
events."""
