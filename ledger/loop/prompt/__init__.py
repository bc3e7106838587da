"""What the agent is told next: the next prompt and the summary of the loop so far."""
