"""The aiohttp HTTPS admission server (AdmissionReview in, JSONPatch out)."""

from kadmit import under_one_name

under_one_name(__name__)
