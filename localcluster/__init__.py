"""An embedded Kubernetes control plane for local runs and tests (kadmit talks to it only over HTTP)."""
