"""AdmissionCheck plugin SDK, its runner, and the built-in checks."""
