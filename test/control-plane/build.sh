#!/usr/bin/env bash
# Builds the control-plane binaries named as arguments (kube-apiserver, kube-controller-manager, etcd;
# none: those three; the real cluster of test/e2e/cluster also asks for kube-scheduler, kube-proxy,
# kubelet and kubectl, and upstream's e2e storage tests for e2e.test and the ginkgo CLI that runs it in
# parallel, see e2e/) with upstream's release flags into
# ${KVC_CACHE_DIR:-~/.cache/kube-volume-controller}/k8s/<k8s-version>/ . The Go tools the tests run
# (helm, promtool) come from modules of their own in tools/<name>/ (so their dependency versions never
# shift the control plane's) and go to the same directory. A binary
# already there (checked against a stamp of the go.mod/go.sum it was built from, one stamp per binary)
# is not rebuilt, so a caller asks only for what it needs: `npm start` never waits for
# kube-controller-manager.
# `build.sh --skew kube-apiserver` builds the older apiserver the integration tests also run against,
# from the module in skew/ (gen-go-mod.sh --skew) into k8s/<its version>/; etcd is the pinned one.
# Prints the directory on stdout as its last line; progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")"
mod=.
if [[ ${1:-} == --skew ]]; then
  mod=skew
  shift
fi
k8s=$(cat "$mod/K8S_VERSION")
etcd=$(cat ETCD_VERSION)
cache=${KVC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-volume-controller}
out="$cache/k8s/$k8s"
if [[ $mod == skew ]]; then
  stamp=$(cat skew/go.mod skew/go.sum build.sh | sha256sum | cut -c1-16)
else
  stamp=$(cat go.mod go.sum etcd/go.mod etcd/go.sum build.sh | sha256sum | cut -c1-16)
fi
# stamp_of NAME: a tool's stamp covers only its own module, so a new helm relinks nothing else.
stamp_of() {
  case $1 in
  helm | promtool) cat "tools/$1/go.mod" "tools/$1/go.sum" build.sh | sha256sum | cut -c1-16 ;;
  *) echo "$stamp" ;;
  esac
}

wanted=("$@")
if [[ $mod == skew ]]; then
  [[ ${#wanted[@]} -gt 0 ]] || wanted=(kube-apiserver)
  for name in "${wanted[@]}"; do
    if [[ $name != kube-apiserver ]]; then
      echo "build.sh --skew: unknown binary \"$name\" (want kube-apiserver; etcd is the pinned one)" >&2
      exit 2
    fi
  done
fi
[[ ${#wanted[@]} -gt 0 ]] || wanted=(kube-apiserver kube-controller-manager etcd)
for name in "${wanted[@]}"; do
  case $name in
  kube-apiserver | kube-controller-manager | etcd | kube-scheduler | kube-proxy | kubelet | kubectl | e2e.test | ginkgo) ;;
  helm | promtool) ;;
  *)
    echo "build.sh: unknown binary \"$name\" (want kube-apiserver, kube-controller-manager, etcd, kube-scheduler, kube-proxy, kubelet, kubectl, e2e.test, ginkgo, helm or promtool)" >&2
    exit 2
    ;;
  esac
done

built() { [[ -x "$out/$1" && "$(cat "$out/.stamp-$1" 2>/dev/null)" == "$(stamp_of "$1")" ]]; }

mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# go_build NAME DIR PACKAGE FLAGS...: `go build -v` names each package as it compiles it; counted
# against the packages `go list` finds missing from the Go build cache, that becomes a progress line
# (packages compiled of total, elapsed, an estimate of what is left) at each tenth and every 15 s.
# compile NAME PACKAGE FLAGS...: go build -v names each package as it compiles it. A test binary
# (NAME.test) is linked by go test -c, which names none: its dependencies are compiled first by go
# build -v (this module's own packages have only tests, and are left to go test).
compile() {
  local name=$1 pkg=$2
  shift 2
  if [[ $name == *.test ]]; then
    # shellcheck disable=SC2046 # a list of packages
    go build -v "$@" $(go list "$@" -test -deps -f '{{if not .Standard}}{{if not .ForTest}}{{.ImportPath}}{{end}}{{end}}' "$pkg" |
      grep -v "^$(go list -m)") && go test -c "$@" -o "$out/$name.tmp.$$" "$pkg"
  else
    go build -v "$@" -o "$out/$name.tmp.$$" "$pkg"
  fi
}

go_build() {
  local name=$1 dir=$2 pkg=$3
  shift 3
  local flags=(-trimpath "$@") list=(-deps)
  [[ $name == *.test ]] && list=(-test -deps)
  echo "building $name: listing its packages (a first build downloads the Go modules) ..." >&2
  local total
  total=$(cd "$dir" && go list "${flags[@]}" "${list[@]}" -f '{{if .Stale}}x{{end}}' "$pkg" | grep -c x) || true
  if ((total > 1)); then
    echo "building $name: $total packages to compile (a cold build takes many minutes) ..." >&2
  else
    echo "building $name: linking (its packages are in the Go build cache) ..." >&2
  fi
  local start=$SECONDS last=$SECONDS compiled=0 tenth=0 line elapsed left
  # In an `if`: a failed build must reach the clean-up below, not end the script (set -e).
  if ! (cd "$dir" && compile "$name" "$pkg" "${flags[@]}") 2>&1 | while IFS= read -r line; do
    if [[ ! $line =~ ^[A-Za-z0-9._~/-]+$ ]]; then
      echo "$line" >&2 # an error, a module download: as go prints it
      continue
    fi
    compiled=$((compiled + 1))
    ((total > 1 && compiled <= total)) || continue
    if ((SECONDS - last >= 15 || compiled * 10 / total > tenth)); then
      last=$SECONDS
      tenth=$((compiled * 10 / total))
      elapsed=$((SECONDS - start))
      left=""
      ((compiled == total)) || left=", about $(mmss $((elapsed * (total - compiled) / compiled))) left"
      echo "building $name: $compiled/$total packages, $(mmss "$elapsed") elapsed$left" >&2
    fi
  done; then
    rm -f "$out/$name.tmp.$$"
    return 1
  fi
  mv "$out/$name.tmp.$$" "$out/$name"
  stamp_of "$name" >"$out/.stamp-$name"
  echo "built $name in $(mmss $((SECONDS - start)))" >&2
}

missing=()
for name in "${wanted[@]}"; do built "$name" || missing+=("$name"); done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "$out"
  exit 0
fi

mkdir -p "$out"
export CGO_ENABLED=0
minor=${k8s#v1.}
minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

echo "building ${missing[*]} ($k8s, etcd $etcd) into $out" >&2
for name in "${missing[@]}"; do
  case $name in
  etcd) go_build etcd etcd go.etcd.io/etcd/server/v3 -ldflags "-s -w" ;;
  e2e.test) go_build e2e.test . ./e2e -ldflags "$ldflags" ;;
  # The CLI at the version e2e.test links (go.mod): only it runs a suite's specs in parallel processes.
  ginkgo) go_build ginkgo . github.com/onsi/ginkgo/v2/ginkgo -ldflags "-s -w" ;;
  helm) go_build helm tools/helm helm.sh/helm/v4/cmd/helm -ldflags "-s -w" ;;
  # remove_all_sd: without Prometheus' service-discovery plugins (upstream's build tag), a fifth fewer
  # packages to compile; rule tests need none.
  promtool) go_build promtool tools/promtool github.com/prometheus/prometheus/cmd/promtool -tags remove_all_sd -ldflags "-s -w" ;;
  *) go_build "$name" "$mod" "k8s.io/kubernetes/cmd/$name" -tags selinux,notest -ldflags "$ldflags" ;;
  esac
done
echo "$out"
