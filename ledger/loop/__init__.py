"""The loop's semantics: the engine and what it consults (rules, promises, signals, stop policies,
guards and their facts, score, checkpoints, completion, configuration, the next prompt)."""
