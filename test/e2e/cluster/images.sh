#!/usr/bin/env bash
# The container images a real single-node cluster and upstream's e2e storage tests (k8s.io/kubernetes
# at test/control-plane/K8S_VERSION) run, built here because no registry is reachable. Each image is
# tagged with the exact reference upstream uses: the sig-storage CSI images from the storage-csi
# manifests, the others from test/utils/image/manifest.go; the tags are read from those files, so a
# new upstream version that changes one fails here instead of at an image pull.
#
#   images.sh build [NAME...]                     build (cached) all images or the named ones
#   images.sh import --address SOCK [NAME...]     ctr -n k8s.io images import each (built first if missing)
#   images.sh list [NAME...]                      the image references, one a line
#   images.sh verify [NAME...]                    import into a scratch containerd and run each image once
#
# Output: one docker-archive per image in ${KVC_CACHE_DIR:-~/.cache/kube-volume-controller}/e2e-images/
# (NAME.tar, all its references in one archive), beside a stamp of its inputs (NAME.tar.stamp): a rerun
# with unchanged inputs does nothing. The Go binaries are cached the same way in bin/. Everything is
# written to a temporary name and renamed at the end, so an interrupted run leaves nothing trusted.
#
# Sources: the CSI components from the `git archive`s in ${KVC_CSI_SOURCES:-/work/shared/third_party/
# kubernetes-csi} (each checked against the sha256 in its README), built as upstream's release-tools
# build them (CGO_ENABLED=0, -mod=vendor, main.version); pause from upstream's build/pause/linux/pause.c;
# agnhost from test/images/agnhost, both in the kubernetes Go module; busybox from Debian's
# busybox-static; the Debian-based images from a debootstrap (minbase) of Debian $suite plus the
# packages their Containerfile installs from deb.debian.org (not pinned: the stamps do not see a new
# Debian point release; remove the cache directory to pick one up).
# Progress goes to stderr. Needs root (debootstrap, podman), Go in /usr/local/go, and the apt packages
#   podman runc debootstrap busybox-static gcc libc6-dev containerd
# (containerd for `ctr`, used by import and verify). CONTAINERS_CONF defaults to test/image/containers.conf.
#
# For the cluster scripts: the VolumeSnapshot CRDs that snapshot-controller needs are in the
# external-snapshotter archive at external-snapshotter-<tag>/client/config/crd/, its RBAC and
# Deployment at deploy/kubernetes/snapshot-controller/ (that Deployment names snapshot-controller:v8.5.0
# in the v8.6.0 archive: use the reference `images.sh list snapshot-controller` prints).
set -euo pipefail
cd "$(dirname "$0")/../../.."
here=test/e2e/cluster/images
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/test/image/containers.conf}
export PATH=/usr/local/go/bin:$PATH GOTOOLCHAIN=local GOFLAGS=
suite=bookworm
cache=${KVC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-volume-controller}/e2e-images
csi_sources=${KVC_CSI_SOURCES:-/work/shared/third_party/kubernetes-csi}
k8s=$(cat test/control-plane/K8S_VERSION)

log() { echo "images: $*" >&2; }
die() {
  log "$*"
  exit 1
}

# The CSI images: NAME ARCHIVE-PROJECT CMD-DIR, in the order they are built (one at a time: the Go
# builds are the slow part, and the machine is shared).
csi_images=(
  "hostpathplugin csi-driver-host-path cmd/hostpathplugin"
  "csi-node-driver-registrar node-driver-registrar cmd/csi-node-driver-registrar"
  "livenessprobe livenessprobe cmd/livenessprobe"
  "csi-provisioner external-provisioner cmd/csi-provisioner"
  "csi-attacher external-attacher cmd/csi-attacher"
  "csi-resizer external-resizer cmd/csi-resizer"
  "csi-snapshotter external-snapshotter cmd/csi-snapshotter"
  "snapshot-controller external-snapshotter cmd/snapshot-controller"
)
# The images e2e's pods run (manifest.go's ImageID names the tag).
other_images=(pause busybox agnhost nginx glibc-dns-testing)
all_images=()
for line in "${csi_images[@]}"; do all_images+=("${line%% *}"); done
all_images+=("${other_images[@]}")

csi_line() {
  local line
  for line in "${csi_images[@]}"; do [[ ${line%% *} == "$1" ]] && echo "$line" && return; done
  return 1
}

k8s_src() {
  local dir
  dir=$(go env GOMODCACHE)/k8s.io/kubernetes@$k8s
  [[ -d $dir ]] || die "k8s.io/kubernetes@$k8s is not in the Go module cache: run npm run control-plane:build (or go mod download in test/control-plane)"
  echo "$dir"
}

# manifest_tag ID: the tag manifest.go gives the image ID (configs[ID] = Config{registry, "name", "tag"}).
manifest_tag() {
  local tag
  tag=$(sed -n "s/^\s*configs\[$1\] = Config{[^,]*, \"[^\"]*\", \"\([^\"]*\)\"}.*/\1/p" "$(k8s_src)/test/utils/image/manifest.go")
  [[ -n $tag ]] || die "manifest.go of $k8s has no configs[$1]"
  echo "$tag"
}

# manifests_tag IMAGE: the one tag the storage-csi manifests give IMAGE (registry/path without tag).
manifests_tag() {
  local tags
  tags=$(grep -rhoE "image: $1:[^ \"]+" "$(k8s_src)/test/e2e/testing-manifests/storage-csi" | sed 's/.*://' | sort -u)
  [[ -n $tags && $(wc -l <<<"$tags") == 1 ]] || die "the storage-csi manifests of $k8s give $1 the tags: ${tags:-none}"
  echo "$tags"
}

# refs NAME: the references of image NAME, one a line.
refs() {
  local s=registry.k8s.io/sig-storage e2e=registry.k8s.io/e2e-test-images
  case $1 in
  pause)
    # manifest.go's tag (e2e's pods), kubeadm's (what a cluster configures as sandbox image) and
    # containerd's own default sandbox_image, so that a containerd left at its defaults never pulls.
    {
      echo "registry.k8s.io/pause:$(manifest_tag Pause)"
      echo "registry.k8s.io/pause:$(sed -n 's/^\s*PauseVersion = "\(.*\)"/\1/p' "$(k8s_src)/cmd/kubeadm/app/constants/constants.go")"
      containerd config default 2>/dev/null | sed -n 's/^\s*sandbox_image = "\(.*\)"/\1/p'
    } | awk 'NF && !seen[$0]++'
    ;;
  # snapshot-controller is deployed by the cluster, not by e2e: the csi-snapshotter's release.
  snapshot-controller) echo "$s/snapshot-controller:$(manifests_tag $s/csi-snapshotter)" ;;
  busybox)
    # manifest.go's, and the one csi-mock-proxy.yaml pins.
    printf '%s\n' "$e2e/busybox:$(manifest_tag BusyBox)" "$e2e/busybox:$(manifests_tag $e2e/busybox)" | awk '!seen[$0]++'
    ;;
  agnhost) echo "$e2e/agnhost:$(manifest_tag Agnhost)" ;;
  nginx) echo "$e2e/nginx:$(manifest_tag Nginx)" ;;
  # multivolume's pods (testsuites/multivolume.go).
  glibc-dns-testing) echo "$e2e/glibc-dns-testing:$(manifest_tag GlibcDnsTesting)" ;;
  *)
    csi_line "$1" >/dev/null || die "unknown image $1 (known: ${all_images[*]})"
    echo "$s/$1:$(manifests_tag "$s/$1")"
    ;;
  esac
}

hash() { sha256sum | cut -c1-16; }
mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# remove DIR: a work directory, after unmounting what a killed debootstrap or build left mounted in it.
remove() {
  [[ $1 == /*/* ]] || return 0
  awk -v dir="$1/" 'index($2, dir) == 1 { print $2 }' /proc/mounts | sort -r | xargs -r -n1 umount -l
  rm -rf "$1"
}

# The run's work directory (set by lock, before anything runs in a subshell).
work=""
workdir() { echo "$work"; }

# csi_archive PROJECT TAG: the archive's path, after checking its sha256 against the README's table.
csi_archive() {
  local archive=$1-$2.tar.gz want have
  want=$(awk -F'|' -v a="$archive" '{ gsub(/ /, "", $2) } $2 == a { gsub(/ /, "", $5); print $5 }' "$csi_sources/README.md")
  [[ -n $want ]] || die "$csi_sources/README.md lists no $archive (the manifests want tag $2)"
  have=$(sha256sum <"$csi_sources/$archive" | cut -d' ' -f1)
  [[ $have == "$want" ]] || die "$csi_sources/$archive: sha256 $have, the README says $want"
  echo "$csi_sources/$archive"
}

# Go binaries: bin/NAME with bin/NAME.stamp. The stamp covers the sources and the build command, not
# this script, so editing how an image is assembled does not rebuild them.
go_flags() { echo "CGO_ENABLED=0 $(go env GOVERSION) -mod=vendor -trimpath -ldflags=-X main.version=$1 -extldflags -static"; }

# csi_binary NAME: builds bin/NAME from its archive unless the stamp matches.
csi_binary() {
  local name=$1 project cmd tag archive stamp out=$cache/bin/$1 start=$SECONDS dir
  read -r _ project cmd <<<"$(csi_line "$name")"
  tag=$(refs "$name" | sed 's/.*://')
  archive=$(csi_archive "$project" "$tag")
  stamp=$({ sha256sum <"$archive"; echo "$cmd"; go_flags "$tag"; } | hash)
  [[ -x $out && $(cat "$out.stamp" 2>/dev/null) == "$stamp" ]] && return
  log "building $name $tag (go build of $project's $cmd) ..."
  dir=$(workdir)/$project-$tag
  [[ -d $dir ]] || tar -C "$(workdir)" -xzf "$archive"
  [[ -d $dir/$cmd ]] || die "$archive has no $project-$tag/$cmd"
  mkdir -p "$cache/bin"
  (cd "$dir" && CGO_ENABLED=0 go build -mod=vendor -trimpath \
    -ldflags "-X main.version=$tag -extldflags \"-static\"" -o "$out.tmp.$$" "./$cmd") || {
    rm -f "$out.tmp.$$"
    die "go build of $name failed"
  }
  mv "$out.tmp.$$" "$out"
  echo "$stamp" >"$out.stamp"
  log "built $name in $(mmss $((SECONDS - start)))"
}

# agnhost_binary: bin/agnhost from the kubernetes module, built in a copy of the control plane's
# module (test/control-plane/go.mod pins k8s.io/kubernetes and its staging modules; -mod=mod adds the
# few agnhost-only modules, such as the SCTP library, to the copy's go.sum).
agnhost_binary() {
  local out=$cache/bin/agnhost stamp start=$SECONDS dir
  stamp=$({ cat test/control-plane/go.mod test/control-plane/go.sum; go env GOVERSION; echo "CGO_ENABLED=0 -trimpath -ldflags=-s -w"; } | hash)
  [[ -x $out && $(cat "$out.stamp" 2>/dev/null) == "$stamp" ]] && return
  log "building agnhost (go build of k8s.io/kubernetes@$k8s/test/images/agnhost) ..."
  dir=$(workdir)/agnhost-module
  mkdir -p "$dir" "$cache/bin"
  cp test/control-plane/go.mod test/control-plane/go.sum "$dir/"
  (cd "$dir" && CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "-s -w" -o "$out.tmp.$$" k8s.io/kubernetes/test/images/agnhost) || {
    rm -f "$out.tmp.$$"
    die "go build of agnhost failed"
  }
  mv "$out.tmp.$$" "$out"
  echo "$stamp" >"$out.stamp"
  log "built agnhost in $(mmss $((SECONDS - start)))"
}

# pause_binary: bin/pause with upstream's CFLAGS (build/pause/Makefile), stripped as upstream does.
pause_binary() {
  local out=$cache/bin/pause src tag stamp
  src=$(k8s_src)/build/pause/linux/pause.c
  tag=$(manifest_tag Pause)
  stamp=$({ cat "$src"; gcc --version | head -1; echo "$tag"; } | hash)
  [[ -x $out && $(cat "$out.stamp" 2>/dev/null) == "$stamp" ]] && return
  mkdir -p "$cache/bin"
  gcc -Os -Wall -Werror -static "-DVERSION=v$tag-kvc" -o "$out.tmp.$$" "$src" || die "gcc of pause.c failed"
  strip "$out.tmp.$$"
  mv "$out.tmp.$$" "$out"
  echo "$stamp" >"$out.stamp"
}

# debian_base: the podman image localhost/kvc-e2e-debian:$suite (FROM scratch, the debootstrap
# minbase root filesystem, cached as a tar), labelled with its stamp; sets $base to the stamp.
base=""
debian_base() {
  local rootfs=$cache/debian-$suite-minbase.tar image=localhost/kvc-e2e-debian:$suite stamp dir start=$SECONDS
  if [[ ! -s $rootfs || ! -s $rootfs.sha256 ]]; then
    dir=$(workdir)/debootstrap
    log "debootstrap $suite (minbase) ..."
    debootstrap --variant=minbase "$suite" "$dir" http://deb.debian.org/debian >"$(workdir)/debootstrap.log" 2>&1 ||
      {
        tail -n 20 "$(workdir)/debootstrap.log" >&2
        die "debootstrap failed"
      }
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    tar -C "$dir" --numeric-owner -cf "$rootfs.tmp.$$" .
    remove "$dir"
    sha256sum <"$rootfs.tmp.$$" | cut -c1-16 >"$rootfs.sha256.tmp.$$"
    mv "$rootfs.tmp.$$" "$rootfs"
    mv "$rootfs.sha256.tmp.$$" "$rootfs.sha256"
    log "debootstrap took $(mmss $((SECONDS - start)))"
  fi
  stamp=$(cat "$rootfs.sha256" $here/debian/Containerfile | hash)
  if [[ $(podman image inspect --format '{{index .Labels "kvc.stamp"}}' "$image" 2>/dev/null) != "$stamp" ]]; then
    dir=$(workdir)/debian-ctx
    mkdir -p "$dir"
    cp $here/debian/Containerfile "$dir/"
    ln "$rootfs" "$dir/rootfs.tar" 2>/dev/null || cp "$rootfs" "$dir/rootfs.tar"
    podman build --isolation=chroot --pull=never --label "kvc.stamp=$stamp" -t "$image" "$dir" \
      >"$(workdir)/debian-build.log" 2>&1 || {
      tail -n 20 "$(workdir)/debian-build.log" >&2
      die "podman build of $image failed"
    }
    rm -rf "$dir"
  fi
  base=$stamp
}

# busybox_rootfs DIR: Debian's static busybox with a link for each applet, and the few files of the
# upstream image (busybox:1.37.0 from Docker Hub): root and nobody, a world-writable /tmp.
busybox_rootfs() {
  local dir=$1 bin applet
  bin=$(dpkg -L busybox-static 2>/dev/null | grep -m1 '/bin/busybox$') || die "busybox-static is not installed (apt-get install busybox-static)"
  mkdir -p "$dir/bin" "$dir/etc" "$dir/tmp" "$dir/root" "$dir/home" "$dir/var/spool/mail"
  chmod 1777 "$dir/tmp"
  chmod 700 "$dir/root"
  cp "$bin" "$dir/bin/busybox"
  for applet in $("$bin" --list); do
    [[ $applet == busybox ]] || ln -s busybox "$dir/bin/$applet"
  done
  printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'nobody:x:65534:65534:nobody:/home:/bin/false' >"$dir/etc/passwd"
  printf '%s\n' 'root:x:0:' 'nobody:x:65534:' >"$dir/etc/group"
}

# image NAME: builds NAME.tar unless its stamp matches.
image() {
  local name=$1 tar=$cache/$1.tar refs_=() stamp inputs ctx tmp start=$SECONDS list
  base=""
  list=$(refs "$name")
  mapfile -t refs_ <<<"$list"
  ctx=$(workdir)/ctx-$name
  rm -rf "$ctx"
  mkdir -p "$ctx"
  cp "$here/$name/Containerfile" "$ctx/"
  # The inputs besides the Containerfile and the recipe, into $inputs; the build context into $ctx.
  case $name in
  pause)
    pause_binary
    inputs=$(cat "$cache/bin/pause.stamp")
    cp "$cache/bin/pause" "$ctx/"
    ;;
  busybox)
    busybox_rootfs "$ctx/rootfs"
    inputs=$(dpkg-query -W -f '${Version}' busybox-static)
    ;;
  agnhost)
    agnhost_binary
    debian_base
    inputs="$(cat "$cache/bin/agnhost.stamp") $base"
    cp "$cache/bin/agnhost" "$ctx/"
    cp "$(k8s_src)"/test/images/agnhost/porter/localhost.{crt,key} "$ctx/"
    ;;
  nginx | glibc-dns-testing)
    debian_base
    inputs=$base
    ;;
  *)
    csi_binary "$name"
    inputs=$(cat "$cache/bin/$name.stamp")
    [[ $name != hostpathplugin ]] || {
      debian_base
      inputs+=" $base"
    }
    cp "$cache/bin/$name" "$ctx/"
    ;;
  esac
  # The functions that assemble an image, not the whole script: editing verify rebuilds nothing.
  stamp=$({ declare -f image busybox_rootfs; cat "$here/$name/Containerfile"; echo "$inputs"; printf '%s\n' "${refs_[@]}"; } | hash)
  if [[ -s $tar && $(cat "$tar.stamp" 2>/dev/null) == "$stamp" ]]; then
    rm -rf "$ctx"
    return
  fi
  log "building image $name (${refs_[*]}) ..."
  tmp=localhost/kvc-e2e-$name:$stamp-$$
  local build=(podman build --isolation=chroot --pull=never -t "$tmp")
  [[ -z $base ]] || build+=(--build-arg "BASE=localhost/kvc-e2e-debian:$suite")
  "${build[@]}" "$ctx" >"$(workdir)/build-$name.log" 2>&1 || {
    tail -n 30 "$(workdir)/build-$name.log" >&2
    die "podman build of $name failed"
  }
  local ref
  for ref in "${refs_[@]}"; do podman tag "$tmp" "$ref"; done
  podman save --quiet --format docker-archive --multi-image-archive -o "$tar.tmp.$$" "${refs_[@]}"
  # The archive is the cache; podman's copies would only fill its storage (the Debian base stays).
  podman rmi "$tmp" "${refs_[@]}" >/dev/null
  mv "$tar.tmp.$$" "$tar"
  echo "$stamp" >"$tar.stamp"
  rm -rf "$ctx"
  log "built image $name in $(mmss $((SECONDS - start))): $(du -h "$tar" | cut -f1)"
}

names() {
  local name
  if [[ $# -eq 0 ]]; then
    printf '%s\n' "${all_images[@]}"
    return
  fi
  for name in "$@"; do
    [[ " ${all_images[*]} " == *" $name "* ]] || die "unknown image $name (known: ${all_images[*]})"
    echo "$name"
  done
}

# One run at a time: two would build the same binaries and images into the same names.
lock() {
  mkdir -p "$cache"
  exec 9>"$cache/.lock"
  flock 9
  # Work directories and temporary files of runs that were killed (an hour is far past any build).
  local stale
  find "$cache" -maxdepth 2 \( -name 'tmp.*' -o -name '*.tmp.*' \) -mmin +60 -print0 |
    while IFS= read -r -d '' stale; do remove "$stale"; done
  work=$(mktemp -d "$cache/tmp.XXXXXX")
  trap 'remove "$work"' EXIT
}

build() {
  local name start=$SECONDS list
  lock
  list=$(names "$@")
  for name in $list; do image "$name"; done
  log "all built in $(mmss $((SECONDS - start))) into $cache"
}

import() {
  local address
  [[ ${1:-} == --address && -n ${2:-} ]] || die "usage: images.sh import --address <containerd.sock> [NAME...]"
  address=$2
  shift 2
  build "$@"
  import_into "$address" "$@"
}

# import_into SOCK [NAME...]: imports the built archives (unpacked for containerd's default snapshotter).
import_into() {
  local address=$1 name list start
  shift
  list=$(names "$@")
  for name in $list; do
    start=$SECONDS
    ctr --address "$address" -n k8s.io images import "$cache/$name.tar" >/dev/null || die "ctr images import of $name failed"
    log "imported $name in $(mmss $((SECONDS - start)))"
  done
}

# verify [NAME...]: imports the images into a containerd of its own (own root, state, socket and runc
# state in a temporary directory: nothing shared with the cluster's containerd) and runs each once with a command that prints its version or help; then stops
# that containerd, its shims and its mounts, and removes the directory.
verify() {
  local d name ref cmd out failed=0 pid list have
  build "$@"
  list=$(names "$@")
  d=$(mktemp -d /tmp/kvc-e2e-images-verify.XXXXXX)
  cat >"$d/config.toml" <<EOF
version = 2
root = "$d/root"
state = "$d/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$d/sock"
[ttrpc]
  address = "$d/ttrpc.sock"
EOF
  # Not holding the lock (fd 9): the shims it starts would inherit it, and outlive a killed run.
  containerd --config "$d/config.toml" >"$d/containerd.log" 2>&1 9>&- &
  pid=$!
  # shellcheck disable=SC2064 # expand now: $d and $pid are local
  trap "verify_cleanup '$d' $pid; remove '$work'" EXIT
  local deadline=$((SECONDS + 30))
  until ctr --address "$d/sock" version >/dev/null 2>&1; do
    ((SECONDS < deadline)) || {
      cat "$d/containerd.log" >&2
      die "the scratch containerd did not start"
    }
    sleep 0.2
  done
  import_into "$d/sock" "$@"
  have=$(ctr --address "$d/sock" -n k8s.io images ls -q)
  for name in $list; do
    for ref in $(refs "$name"); do
      grep -qxF "$ref" <<<"$have" || {
        log "FAIL $name: $ref is not in containerd after the import"
        failed=1
      }
    done
    ref=$(refs "$name")
    ref=${ref%%$'\n'*}
    case $name in
    pause) cmd=(/pause -v) ;;
    busybox) cmd=(sh -c 'busybox | head -1; ls /bin | wc -l') ;;
    agnhost) cmd=(sh -c '/agnhost --help | head -3; nsenter --version') ;;
    nginx) cmd=(nginx -v) ;;
    glibc-dns-testing) cmd=(sh -c 'dig -v 2>&1; ldd --version | head -1') ;;
    hostpathplugin) cmd=(sh -c '/hostpathplugin --version; findmnt --version; mount --version; blkid --version; mkfs.ext4 -V; mkfs.xfs -V') ;;
    livenessprobe) cmd=(/livenessprobe --help) ;; # it has no --version
    *) cmd=("/$name" --version) ;;
    esac
    if out=$(timeout 60 ctr --address "$d/sock" -n k8s.io run --runc-root "$d/runc" --rm "$ref" "verify-$name" "${cmd[@]}" 2>&1); then
      out=$(tr '\n' ' ' <<<"$out")
      log "ok $name ($ref): ${out:0:300}"
    else
      log "FAIL $name ($ref): $out"
      failed=1
    fi
  done
  if [[ $'\n'$list$'\n' == *$'\n'hostpathplugin$'\n'* && $'\n'$list$'\n' == *$'\n'livenessprobe$'\n'* ]]; then
    csi_pair "$d" || failed=1
  fi
  ctr --address "$d/sock" -n k8s.io images ls >&2
  ((failed == 0)) || die "verify failed"
}

# csi_pair DIR: the driver and a sidecar together, as in a pod: hostpathplugin serves CSI on a socket
# in a shared directory, and livenessprobe's /healthz answers 200 only when the driver's Probe call
# over that socket succeeds.
csi_pair() {
  local d=$1 driver probe port deadline c
  driver=$(refs hostpathplugin)
  probe=$(refs livenessprobe)
  port=$((20000 + RANDOM % 20000))
  mkdir -p "$d/csi"
  local run=(ctr --address "$d/sock" -n k8s.io run --runc-root "$d/runc" -d --net-host --mount "type=bind,src=$d/csi,dst=/csi,options=rbind:rw")
  "${run[@]}" --log-uri "file://$d/driver.log" "$driver" verify-csi-driver \
    /hostpathplugin --endpoint=unix:///csi/csi.sock --nodeid=verify --drivername=hostpath.csi.k8s.io --v=5 >/dev/null
  "${run[@]}" --log-uri "file://$d/probe.log" "$probe" verify-csi-probe \
    /livenessprobe --csi-address=/csi/csi.sock "--http-endpoint=127.0.0.1:$port" >/dev/null
  deadline=$((SECONDS + 30))
  until [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthz") == 200 ]]; do
    if ((SECONDS >= deadline)); then
      log "FAIL hostpathplugin + livenessprobe: no 200 from /healthz in 30s; the driver's log, then the probe's:"
      tail -n 20 "$d/driver.log" "$d/probe.log" >&2
      return 1
    fi
    sleep 0.5
  done
  log "ok hostpathplugin + livenessprobe: /healthz is 200 (the driver answered Probe on its socket)"
  for c in verify-csi-probe verify-csi-driver; do
    ctr --address "$d/sock" -n k8s.io task rm -f "$c" >/dev/null
    ctr --address "$d/sock" -n k8s.io containers rm "$c"
  done
}

verify_cleanup() {
  local d=$1 pid=$2 p cwd
  set +e # clean up all, whatever fails
  # The containers a failed check left running (ctr task ls: TASK PID STATUS; only pids > 1: a stopped
  # task's 0 would be `kill -9 0`, this whole process group), then their shims (the processes whose
  # working directory is a task's bundle in this containerd's state), then containerd.
  ctr --address "$d/sock" -n k8s.io task ls 2>/dev/null | awk 'NR > 1 && $2 > 1 { print $2 }' | while read -r p; do
    kill -9 "$p" 2>/dev/null
  done
  for p in /proc/[0-9]*; do
    cwd=$(readlink "$p/cwd" 2>/dev/null) && [[ $cwd == "$d"/* ]] && kill -9 "${p#/proc/}" 2>/dev/null
  done
  kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  remove "$d"
}

action=${1:-}
shift || true
case $action in
build) build "$@" ;;
import) import "$@" ;;
list)
  list=$(names "$@")
  for name in $list; do refs "$name"; done
  ;;
verify) verify "$@" ;;
*) die "usage: images.sh build|import --address SOCK|list|verify [NAME...]" ;;
esac
