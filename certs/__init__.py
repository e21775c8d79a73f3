"""Self-managed webhook certificates: CA, serving certificate, rotation, caBundle injection."""

from kadmit import under_one_name

under_one_name(__name__)
