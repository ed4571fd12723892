#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and etcd with upstream's release flags into
# ${KVC_CACHE_DIR:-~/.cache/kube-volume-controller}/k8s/<k8s-version>/ . With the binaries already
# there (checked against a stamp of the go.mod/go.sum they were built from) it returns at once.
# Prints the directory on stdout as its last line; progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")"
k8s=$(cat K8S_VERSION)
etcd=$(cat ETCD_VERSION)
cache=${KVC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-volume-controller}
out="$cache/k8s/$k8s"
stamp=$(cat go.mod go.sum etcd/go.mod etcd/go.sum build.sh | sha256sum | cut -c1-16)

if [[ -f "$out/.stamp" && "$(cat "$out/.stamp")" == "$stamp" ]] &&
  [[ -x "$out/kube-apiserver" && -x "$out/kube-controller-manager" && -x "$out/etcd" ]]; then
  echo "$out"
  exit 0
fi

mkdir -p "$out"
rm -f "$out/.stamp"
export CGO_ENABLED=0
minor=${k8s#v1.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

start=$SECONDS
for cmd in kube-apiserver kube-controller-manager; do
  echo "building $cmd $k8s (a cold build takes many minutes) ..." >&2
  go build -trimpath -tags selinux,notest -ldflags "$ldflags" -o "$out/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd"
  mv "$out/$cmd.tmp" "$out/$cmd"
done
echo "building etcd $etcd ..." >&2
(cd etcd && go build -trimpath -ldflags "-s -w" -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3)
mv "$out/etcd.tmp" "$out/etcd"
echo "$stamp" > "$out/.stamp"
echo "built in $((SECONDS - start))s" >&2
echo "$out"
