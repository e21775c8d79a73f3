"""Write an upstream CRD into manifests/third-party/ with the descriptions of its schema removed.

    python hack/trim_crd.py UPSTREAM.yaml OUT.yaml --source "owner/repo@commit:path" [--only-version v1]

Some upstream CRDs are megabytes of field descriptions; the local API server and kubectl need
only the structure (types, enums, required fields, x-kubernetes-* markers). This keeps every
schema keyword but ``description``. ``--only-version`` keeps one version and drops the
conversion webhook (upstream's converts between versions with a webhook the local cluster does
not run); the header of the written file says what was changed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml


def strip_descriptions(node: Any, in_properties: bool = False) -> Any:
    """``node`` without ``description`` keys; a property *named* description is kept."""
    if isinstance(node, dict):
        return {
            k: strip_descriptions(v, in_properties=(k == "properties" and not in_properties))
            for k, v in node.items()
            if in_properties or k != "description"
        }
    if isinstance(node, list):
        return [strip_descriptions(v) for v in node]
    return node


def trim(crd: dict[str, Any], only_version: str | None) -> dict[str, Any]:
    spec = crd["spec"]
    versions = spec["versions"]
    if only_version is not None:
        versions = [v for v in versions if v["name"] == only_version]
        if not versions:
            raise ValueError(f"the CRD has no version {only_version!r}")
        versions[0]["storage"] = True
        spec.pop("conversion", None)
    for version in versions:
        schema = version.get("schema") or {}
        if "openAPIV3Schema" in schema:
            schema["openAPIV3Schema"] = strip_descriptions(schema["openAPIV3Schema"])
    spec["versions"] = versions
    return crd


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="trim_crd.py", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("upstream", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--source", required=True, help="where the upstream file comes from (for the header)")
    parser.add_argument("--license", default="Apache-2.0")
    parser.add_argument("--only-version")
    args = parser.parse_args(argv)
    docs = [d for d in yaml.safe_load_all(args.upstream.read_text()) if d]
    if len(docs) != 1 or docs[0].get("kind") != "CustomResourceDefinition":
        print(f"trim_crd.py: {args.upstream} is not one CustomResourceDefinition", file=sys.stderr)
        return 1
    try:
        crd = trim(docs[0], args.only_version)
    except ValueError as exc:
        print(f"trim_crd.py: {exc}", file=sys.stderr)
        return 1
    header = [f"# From {args.source} ({args.license}): upstream's schema with its descriptions removed"]
    if args.only_version:
        header.append(
            f"# (hack/trim_crd.py); only version {args.only_version} is kept, without the conversion webhook."
        )
    else:
        header.append("# (hack/trim_crd.py); nothing else is changed.")
    args.out.write_text(
        "\n".join(header) + "\n---\n" + yaml.dump(crd, Dumper=yaml.CSafeDumper, sort_keys=False, width=120)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
