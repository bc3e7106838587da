"""The monitor's screens, one module each, named for what they show."""
