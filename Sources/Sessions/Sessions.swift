// Placeholder until the Sessions target lands (issue 3).
