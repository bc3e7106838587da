"""What one iteration is checked against: rules and their checks, promises, todos, the score,
``validate_completion``."""
