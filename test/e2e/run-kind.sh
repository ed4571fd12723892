#!/usr/bin/env bash
# End-to-end on kind (needs kind, kubectl, and docker or podman: KIND_EXPERIMENTAL_PROVIDER=podman
# makes kind run its nodes with podman, and the image is then built with podman and loaded from an
# archive; where the Dockerfile's base cannot be pulled, build its stand-in first:
# test/image/base-image.sh, and BUILD_ARGS=--pull=never).
# Creates a cluster whose KCM volume loops are off, builds and loads the image, deploys manifests/,
# installs the CSI hostpath driver (attachRequired=true) for the attach scenario, and runs the same
# scenario suite the embedded integration test runs. KEEP=1 keeps the cluster.
set -euo pipefail
cd "$(dirname "$0")/../.."
cluster=${CLUSTER:-kvc-e2e}
# Fully qualified: podman would otherwise name it localhost/..., which the manifest's name is not.
image=docker.io/library/kube-volume-controller:e2e
engine=docker
[ "${KIND_EXPERIMENTAL_PROVIDER:-}" = podman ] && engine=podman
csi_version=${CSI_HOSTPATH_VERSION:-v1.15.0}

kind create cluster --name "$cluster" --config test/e2e/kind-config.yaml
trap '[ "${KEEP:-}" = 1 ] || kind delete cluster --name "$cluster"' EXIT
kubeconfig=$(mktemp)
kind get kubeconfig --name "$cluster" >"$kubeconfig"
export KUBECONFIG=$kubeconfig

# shellcheck disable=SC2086 # BUILD_ARGS is a list of flags
$engine build ${BUILD_ARGS:-} -t "$image" .
if [ "$engine" = podman ]; then
  # `kind load docker-image` needs a Docker engine; an archive loads into any provider's nodes.
  podman save --format=docker-archive -o "$kubeconfig.image.tar" "$image"
  kind load image-archive "$kubeconfig.image.tar" --name "$cluster"
else
  kind load docker-image "$image" --name "$cluster"
fi
# The kustomization orders the objects (the Namespace first), as a user's `kubectl apply -k` does.
kubectl kustomize manifests/ | sed "s|image: kube-volume-controller:[^ ]*|image: $image|" | kubectl apply -f -
kubectl -n kube-volume-controller rollout status deploy/kube-volume-controller --timeout=180s

# The CSI hostpath driver (external-attacher included) and its StorageClass csi-hostpath-sc.
src=$(mktemp -d)
git clone --depth 1 --branch "$csi_version" https://github.com/kubernetes-csi/csi-driver-host-path "$src"
"$src/deploy/kubernetes-latest/deploy.sh"
kubectl apply -f "$src/examples/csi-storageclass.yaml"

npx tsx test/e2e/run-scenarios.ts --kubeconfig="$kubeconfig" --wffc-class=standard --csi-class=csi-hostpath-sc
