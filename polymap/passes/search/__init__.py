"""Choice: search space, heuristics, register blocking, compile's choice."""
