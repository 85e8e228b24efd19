// Placeholder until the HTTPServer target lands (issue 3).
