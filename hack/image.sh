#!/usr/bin/env bash
# Build kadmit's image from the Dockerfile on this machine without a daemon, export it as an OCI
# archive, and run its entrypoint chrooted on a read-only root, as the Deployment runs it.
#
#   sudo hack/image.sh [OUTPUT_DIR]      # root: debootstrap, buildah (chroot isolation), mounts
#
# 1. a base image made from Debian's packages: debootstrap (minbase, bookworm, with python3 and
#    python3-venv) from the mirror this machine's apt uses (or $DEBIAN_MIRROR), imported with buildah;
# 2. kadmit's wheel, its engine compiled (KADMIT_COMPILE=1, see setup.py), and its dependencies'
#    wheels (pip wheel .) as the build context's wheelhouse;
# 3. buildah bud --isolation chroot --build-arg BASE=<that base> on the Dockerfile;
# 4. buildah push to an OCI archive (OUTPUT_DIR/kadmit-<version>.oci.tar) and an OCI layout;
#    its size and layers are printed;
# 5. umoci unpack of the layout, then the entrypoint in a private mount namespace: the root
#    remounted read-only, a tmpfs on /tmp, user 65532: `kadmit --version`, then `kadmit run`
#    against `kadmit local --api-only` with the manifests applied server-side and a token of
#    kadmit's ServiceAccount, until its readiness probe answers.
#
# Needs: buildah, umoci, debootstrap (apt-get install buildah umoci debootstrap), kubectl, and
# the project installed in the running Python (for the wheel and kadmit local). CI does not run it.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$(mkdir -p "${1:-$ROOT/build/image}" && cd "${1:-$ROOT/build/image}" && pwd)"
WORK="$(mktemp -d /tmp/kadmit-image.XXXXXX)"
PYTHON="${PYTHON:-python3}"
VERSION="$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("kadmit"))')"
TAG="localhost/kadmit:$VERSION"
BASE_TAG="localhost/kadmit-base:bookworm"
export STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
LOCAL_PID=""

step() { printf '\n== %s\n' "$*"; }
cleanup() {
  [ -n "$LOCAL_PID" ] && kill "$LOCAL_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

for tool in buildah umoci debootstrap kubectl; do
  command -v "$tool" >/dev/null || { echo "hack/image.sh: $tool is not installed" >&2; exit 1; }
done

step "base image from Debian's packages (debootstrap)"
MIRROR="${DEBIAN_MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)}"
[ -n "$MIRROR" ] || MIRROR="$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list)"
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$WORK/rootfs" "$MIRROR" \
  > "$WORK/debootstrap.log" 2>&1 || { tail -20 "$WORK/debootstrap.log"; exit 1; }
rm -rf "$WORK/rootfs/var/cache/apt/archives"/*.deb "$WORK/rootfs/var/lib/apt/lists"/*
tar -C "$WORK/rootfs" -cf "$WORK/rootfs.tar" .
base="$(buildah from scratch)"
buildah add "$base" "$WORK/rootfs.tar" / >/dev/null
buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd /usr/bin/python3 "$base"
buildah commit --rm "$base" "$BASE_TAG" >/dev/null
buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$BASE_TAG"

step "the wheelhouse: kadmit's wheel and its dependencies'"
mkdir -p "$WORK/context/wheelhouse"
KADMIT_COMPILE=1 "$PYTHON" -m pip wheel --quiet "$ROOT" -w "$WORK/context/wheelhouse" 2>&1 | { grep -v "^WARNING: Location" || true; }
ls "$WORK/context/wheelhouse"
cp "$ROOT/Dockerfile" "$ROOT/.dockerignore" "$WORK/context/"

step "buildah bud (chroot isolation), base $BASE_TAG"
buildah bud --quiet --layers=false --build-arg BASE="$BASE_TAG" -t "$TAG" "$WORK/context" >/dev/null
buildah inspect --type image --format 'entrypoint {{.OCIv1.Config.Entrypoint}} cmd {{.OCIv1.Config.Cmd}} user {{.OCIv1.Config.User}}' "$TAG"

step "export: OCI archive and layout"
buildah push --quiet "$TAG" "oci-archive:$OUT/kadmit-$VERSION.oci.tar:$VERSION"
buildah push --quiet "$TAG" "oci:$WORK/layout:$VERSION"
ls -l "$OUT/kadmit-$VERSION.oci.tar"
manifest="$(jq -r '.manifests[0].digest' "$WORK/layout/index.json" | cut -d: -f2)"
jq -r '.layers[] | "layer \(.digest[7:19]) \(.size) bytes"' "$WORK/layout/blobs/sha256/$manifest"

step "unpack (umoci) and run the entrypoint: read-only root, /tmp a tmpfs, user 65532"
umoci unpack --image "$WORK/layout:$VERSION" "$WORK/bundle" >/dev/null
rootfs="$WORK/bundle/rootfs"
du -sh "$rootfs" | sed 's/^/unpacked: /'
du -sh "$rootfs/opt/kadmit" | sed 's/^/the venv: /'
entrypoint="$(jq -r '.process.args | join(" ")' "$WORK/bundle/config.json")"
echo "OCI runtime config: args [$entrypoint] user $(jq -r '.process.user | "\(.uid):\(.gid)"' "$WORK/bundle/config.json")"

contained() {  # run "$@" as the image would: its root read-only, its own /proc, /dev and /tmp
  unshare --mount --fork sh -c '
    set -e
    r="$1"; shift
    mount --bind "$r" "$r"
    mount -o remount,bind,ro "$r"
    mount -t proc proc "$r/proc"
    mount --rbind /dev "$r/dev"
    mount -t tmpfs -o mode=1777 tmpfs "$r/tmp"
    [ -n "$KADMIT_FILES" ] && cp -r "$KADMIT_FILES"/. "$r/tmp/"
    exec chroot --userspec=65532:65532 "$r" env -i PATH=/opt/kadmit/bin:/usr/bin:/bin HOME=/tmp "$@"
  ' contained "$rootfs" "$@"
}

KADMIT_FILES="" contained kadmit --version

step "kadmit run (the image) against kadmit local --api-only"
"$PYTHON" -m kadmit local --api-only --kubeconfig "$WORK/admin.kubeconfig" > "$WORK/local.log" 2>&1 &
LOCAL_PID=$!
for _ in $(seq 60); do grep -q "API server ready" "$WORK/local.log" && break; sleep 1; done
cat "$WORK/local.log"
kubectl --kubeconfig "$WORK/admin.kubeconfig" apply --server-side -k "$ROOT/manifests" > /dev/null
token="$(kubectl --kubeconfig "$WORK/admin.kubeconfig" create token kadmit-controller-manager -n kadmit-system)"
mkdir -p "$WORK/files"
sed "s|token: .*|token: $token|" "$WORK/admin.kubeconfig" > "$WORK/files/kubeconfig"
cat > "$WORK/files/config.yaml" <<'YAML'
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kadmit-system
health: {healthProbeBindAddress: "127.0.0.1:18081"}
metrics: {bindAddress: "127.0.0.1:18443"}
webhook: {port: 19443}
leaderElection: {leaderElect: true, resourceName: kadmit-controller-manager, resourceNamespace: kadmit-system}
YAML
chmod -R a+rX "$WORK/files"
KADMIT_FILES="$WORK/files" contained kadmit run --kubeconfig /tmp/kubeconfig --config /tmp/config.yaml \
  > "$WORK/run.log" 2>&1 &
run_pid=$!
ready=""
for _ in $(seq 60); do
  if curl -fsS http://127.0.0.1:18081/readyz >/dev/null 2>&1; then ready=yes; break; fi
  kill -0 "$run_pid" 2>/dev/null || break
  sleep 1
done
echo "readyz: ${ready:-no}"
kubectl --kubeconfig "$WORK/admin.kubeconfig" get lease -n kadmit-system -o custom-columns=LEASE:.metadata.name,HOLDER:.spec.holderIdentity
kubectl --kubeconfig "$WORK/admin.kubeconfig" get secret kadmit-webhook-server-cert -n kadmit-system -o name
kill "$run_pid" 2>/dev/null || true
wait "$run_pid" 2>/dev/null || true
tail -5 "$WORK/run.log"
[ -n "$ready" ] || { echo "hack/image.sh: kadmit run in the image never became ready" >&2; exit 1; }
echo
echo "image: $OUT/kadmit-$VERSION.oci.tar ($TAG)"
