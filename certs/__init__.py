"""Self-managed webhook certificates: CA, serving certificate, rotation, caBundle injection."""
