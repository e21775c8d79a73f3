"""The aiohttp HTTPS admission server (AdmissionReview in, JSONPatch out)."""
