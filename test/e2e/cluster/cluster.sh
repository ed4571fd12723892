#!/usr/bin/env bash
# A real one-node Kubernetes cluster on this machine, the closest to kind it allows (kind's node
# images cannot be pulled here): etcd, kube-apiserver, kube-scheduler, kube-controller-manager,
# kube-proxy and kubelet, all built from the pinned module (test/control-plane/build.sh), with
# Debian's containerd + runc + CNI plugins, every image built here (images.sh), kvc deployed from its
# image and manifests/, and the real CSI hostpath driver and its sidecars. See docs/e2e.md.
#
#   cluster.sh up [--impl=kvc|kcm] [--detach]   bring it up; prints `KUBECONFIG=...` when ready
#   cluster.sh down                             take it down, and clean what a killed run left
#   cluster.sh kubeconfig                       print the admin kubeconfig's path (fails when down)
#   cluster.sh build                            only build the binaries and images (cached)
#   cluster.sh import NAME...                   import more of images.sh's images into the node
#   cluster.sh kcm-controllers LINE             restart KCM with --controllers=LINE
#
# --impl=kvc (default): KCM runs with its four volume loops off (the line test/e2e/kind-config.yaml
# passes) and kvc is deployed; --impl=kcm: KCM runs every loop and kvc is not deployed (with
# --kvc-image its image is built and imported all the same, for the cutover runbook's test).
# Without --detach, `up` stays in the foreground and Ctrl-C (or SIGTERM) takes the cluster down; with
# it, a supervisor keeps the cluster after `up` returns (KEEP=1 means the same), until `down`.
#
# Nothing outlives its owner: every process runs under setpriv's pdeathsig tied to the supervisor,
# and a reaper in its own session (also under pdeathsig) runs `down` when the supervisor dies by any
# signal. Containers are not children of anything we start (containerd's shims daemonise), so `down`
# kills them through their cgroups. `down` is idempotent and also removes what a killed run left:
# processes, mounts under /var/lib/kubelet and the state directory, network namespaces, the bridge,
# kube-proxy's iptables rules, the pods' cgroups.
#
# Network: a bridge of our own (kvc-br0, 10.201.0.1/24) carries the pods; the apiserver listens and
# advertises on 10.201.0.1, never on the machine's external interface; no masquerade, no forwarding:
# no traffic leaves this machine. Needs root, and the apt packages listed in .ci/run.
set -euo pipefail
cd "$(dirname "$0")/../../.."
repo=$PWD
here=$repo/test/e2e/cluster
# The project's Node (the `node` dev dependency), as under npm run.
export PATH="$repo/node_modules/.bin:$PATH"

# One cluster per machine: the kubelet's root is /var/lib/kubelet (the CSI manifests hard-code it).
state=${KVC_CLUSTER_DIR:-/tmp/kvc-cluster}
kubelet_root=/var/lib/kubelet
bridge=kvc-br0
node_ip=10.201.0.1
pod_cidr=10.201.0.0/24
service_cidr=10.202.0.0/24
service_ip=10.202.0.1
node_name=kvc-node
etcd_port=23790
# The images the cluster runs (images.sh builds them): the sandbox, the data scenario's busybox, the
# CSI hostpath driver and its sidecars.
images=(pause busybox hostpathplugin csi-node-driver-registrar livenessprobe csi-provisioner csi-attacher
  csi-resizer csi-snapshotter)
log() { echo "cluster: $*" >&2; }
mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# The four loops kvc replaces; KCM's own line in test/e2e/kind-config.yaml.
kcm_controllers_kvc="*,bootstrapsigner,tokencleaner,-persistentvolume-binder-controller,-persistentvolume-attach-detach-controller,-persistentvolumeclaim-protection-controller,-persistentvolume-protection-controller"
kcm_controllers_kcm="*,bootstrapsigner,tokencleaner"

# --- clean-up -------------------------------------------------------------------------------------

# Processes whose command line names our state directory or kubelet root (our daemons, containerd's
# shims), plus those in the pids directory.
our_pids() {
  for f in "$state"/pids/*; do [ -f "$f" ] && cat "$f"; done
  grep -laF -- "$state/" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3 | grep -vx "$$"
  return 0
}

# Every process in a kubepods cgroup (the containers), in any hierarchy.
pod_pids() {
  find /sys/fs/cgroup -path '*/kubepods*' -name cgroup.procs -exec cat {} + 2>/dev/null || true
}

kill_all() {
  local sig=$1 pids
  pids=$( (our_pids; pod_pids) | sort -u)
  [ -z "$pids" ] || kill "-$sig" $pids 2>/dev/null || true
  return 0
}

cleanup() {
  local t=$SECONDS
  # The reaper, unless this is it: it would run a second clean-up beside this one.
  if [ -z "${KVC_CLUSTER_REAPER:-}" ] && [ -f "$state/pids/reaper" ]; then
    kill -KILL "$(cat "$state/pids/reaper")" 2>/dev/null || true
  fi
  rm -f "$state/pids/reaper"
  # The supervisor first (its children die with it), then whatever is left, containers included.
  if [ -f "$state/supervisor.pid" ]; then
    local sup
    sup=$(cat "$state/supervisor.pid")
    [ "$sup" != $$ ] && kill -TERM "$sup" 2>/dev/null || true
  fi
  kill_all TERM
  for _ in $(seq 50); do
    [ -z "$( (our_pids; pod_pids) | grep -v "^$$\$" | head -1)" ] && break
    sleep 0.1
  done
  kill_all KILL
  for _ in $(seq 50); do
    [ -z "$(pod_pids | head -1)" ] && break
    kill_all KILL
    sleep 0.1
  done
  # Mounts: deepest first; lazily, so a mount still busy cannot stop the rest.
  # (The kubelet bind-mounts its root onto itself to make it shared.)
  awk -v k="$kubelet_root" -v a="$kubelet_root/" -v b="$state/" -v c="/run/netns/cni-" -v d="/var/run/netns/cni-" \
    '$2 == k || index($2, a) == 1 || index($2, b) == 1 || index($2, c) == 1 || index($2, d) == 1 { print $2 }' /proc/mounts |
    sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  rm -f /run/netns/cni-* 2>/dev/null || true
  # The pods' cgroups, leaves first.
  find /sys/fs/cgroup -depth -type d -path '*/kubepods*' -exec rmdir {} + 2>/dev/null || true
  ip link del "$bridge" 2>/dev/null || true
  while iptables -D FORWARD -i "$bridge" ! -o "$bridge" -m comment --comment kvc-cluster -j DROP 2>/dev/null; do :; done
  # kube-proxy's rules (iptables mode), as upstream removes them; then the kubelet's own chains
  # (KUBE-FIREWALL, the canaries), which nothing upstream removes.
  local proxy table ipt chain
  proxy=$(binaries_dir 2>/dev/null)/kube-proxy
  [ -x "$proxy" ] && "$proxy" --cleanup >/dev/null 2>&1 || true
  for ipt in iptables ip6tables; do
    for table in filter nat mangle; do
      "$ipt" -t "$table" -S 2>/dev/null | sed -n 's/^-A \([A-Z]*\) \(.*-j KUBE-.*\)$/\1 \2/p' |
        while read -r rule; do eval "$ipt -t $table -D $rule" 2>/dev/null || true; done
      for chain in $("$ipt" -t "$table" -S 2>/dev/null | sed -n 's/^-N \(KUBE-[A-Z0-9-]*\)$/\1/p'); do
        "$ipt" -t "$table" -F "$chain" 2>/dev/null || true
      done
      for chain in $("$ipt" -t "$table" -S 2>/dev/null | sed -n 's/^-N \(KUBE-[A-Z0-9-]*\)$/\1/p'); do
        "$ipt" -t "$table" -X "$chain" 2>/dev/null || true
      done
    done
  done
  rm -rf "$kubelet_root" /var/lib/csi-hostpath-data "$state"
  log "down ($(mmss $((SECONDS - t))))"
}

# --- building -------------------------------------------------------------------------------------

binaries_dir() {
  local cache=${KVC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-volume-controller}
  echo "$cache/k8s/$(cat "$repo/test/control-plane/K8S_VERSION")"
}

build_all() {
  local t=$SECONDS
  test/control-plane/build.sh etcd kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl >/dev/null
  "$here/images.sh" build "${images[@]}"
  log "binaries and images ready ($(mmss $((SECONDS - t))))"
}

# --- configuration --------------------------------------------------------------------------------

pki() {
  local d=$state/pki
  mkdir -p "$d"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "/CN=kvc-cluster-ca" \
    -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
  # cert NAME SUBJECT [SANS]
  cert() {
    local ext
    ext=$(mktemp)
    echo "basicConstraints=CA:FALSE" >"$ext"
    echo "keyUsage=critical,digitalSignature,keyEncipherment" >>"$ext"
    if [ -n "${3:-}" ]; then
      echo "extendedKeyUsage=serverAuth,clientAuth" >>"$ext"
      echo "subjectAltName=$3" >>"$ext"
    else
      echo "extendedKeyUsage=clientAuth" >>"$ext"
    fi
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "$2" \
      -keyout "$d/$1.key" -out "$d/$1.csr" 2>/dev/null
    openssl x509 -req -in "$d/$1.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
      -extfile "$ext" -out "$d/$1.crt" 2>/dev/null
    rm -f "$ext" "$d/$1.csr"
  }
  cert apiserver "/CN=kube-apiserver" \
    "IP:$node_ip,IP:$service_ip,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert kubelet-serving "/CN=$node_name" "IP:$node_ip,DNS:$node_name"
  cert admin "/O=system:masters/CN=kubernetes-admin"
  cert apiserver-kubelet-client "/O=kubeadm:cluster-admins/CN=kube-apiserver-kubelet-client"
  cert kube-controller-manager "/CN=system:kube-controller-manager"
  cert kube-scheduler "/CN=system:kube-scheduler"
  cert kube-proxy "/CN=system:kube-proxy"
  cert kubelet "/O=system:nodes/CN=system:node:$node_name"
  openssl ecparam -name prime256v1 -genkey -noout -out "$d/sa.key" 2>/dev/null
  openssl ec -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
  for who in admin kube-controller-manager kube-scheduler kube-proxy kubelet; do
    cat >"$state/$who.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{ name: kvc, cluster: { server: "https://$node_ip:6443", certificate-authority: "$d/ca.crt" } }]
users: [{ name: $who, user: { client-certificate: "$d/$who.crt", client-key: "$d/$who.key" } }]
contexts: [{ name: kvc, context: { cluster: kvc, user: $who } }]
current-context: kvc
EOF
  done
}

network() {
  ip link del "$bridge" 2>/dev/null || true
  ip link add "$bridge" type bridge
  ip addr add "$node_ip/24" dev "$bridge"
  ip link set "$bridge" up
  # The bridge plugin turns IP forwarding on for its gateway; nothing from the pods may be routed
  # beyond the bridge.
  iptables -I FORWARD 1 -i "$bridge" ! -o "$bridge" -m comment --comment kvc-cluster -j DROP
  mkdir -p "$state/cni"
  # The bridge plugin finds our bridge and its address (the pods' gateway); no ipMasq: pods talk to
  # each other and to the node, nothing else.
  cat >"$state/cni/10-kvc.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "kvc",
  "plugins": [
    {
      "type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "$pod_cidr", "gateway": "$node_ip" }]],
                "routes": [{ "dst": "0.0.0.0/0" }], "dataDir": "$state/cni/ipam" }
    },
    { "type": "loopback" }
  ]
}
EOF
}

containerd_config() {
  mkdir -p "$state/containerd"
  cat >"$state/containerd/config.toml" <<EOF
version = 2
root = "$state/containerd/root"
state = "$state/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$state/containerd/containerd.sock"
[ttrpc]
  address = "$state/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10.2"
  # This machine's processes lack CAP_SYS_RESOURCE: runc fails ("can't get final child's PID")
  # when it may raise a container's oom_score_adj.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$state/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      Root = "$state/containerd/runc"
      SystemdCgroup = false
EOF
}

kubelet_config() {
  cat >"$state/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: 10250
healthzBindAddress: 127.0.0.1
healthzPort: 10248
readOnlyPort: 0
tlsCertFile: $state/pki/kubelet-serving.crt
tlsPrivateKeyFile: $state/pki/kubelet-serving.key
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: true }
  x509: { clientCAFile: $state/pki/ca.crt }
authorization: { mode: Webhook }
# This machine has cgroup v1 and no systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
podLogsDir: $state/pod-logs
containerRuntimeEndpoint: unix://$state/containerd/containerd.sock
# Every image was built here and cannot be pulled again: no image GC, and no eviction for disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: { memory.available: "100Mi" }
serializeImagePulls: false
# Detach waits for what the kubelet reports (volumesInUse, volumesAttached): report it promptly.
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
resolvConf: ""
EOF
}

proxy_config() {
  cat >"$state/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: { kubeconfig: $state/kube-proxy.kubeconfig }
hostnameOverride: $node_name
clusterCIDR: $pod_cidr
bindAddress: $node_ip
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# No conntrack sysctls: this machine's processes may not set them.
conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s }
EOF
}

# --- processes ------------------------------------------------------------------------------------

# start NAME BINARY ARGS...: a child of this (supervisor) process that dies with it.
start() {
  local name=$1
  shift
  setpriv --pdeathsig KILL -- "$@" >"$state/logs/$name.log" 2>&1 &
  echo $! >"$state/pids/$name"
}

# The node (containerd, the kubelet and so every container) runs in a PID and mount namespace of its
# own whose PID 1 is ours: upstream's e2e runs commands on the node from a privileged hostPID pod
# through `nsenter --mount=/rootfs/proc/1/ns/mnt` (test/e2e/storage/utils/host_exec.go), and this
# machine's own PID 1 may not be entered (its capabilities exceed ours). Its mounts (volumes, the
# pods' netns) stay inside it; host mounts reach it (slave propagation). When its PID 1 dies (unshare
# kills it as it dies itself, under pdeathsig like every process here) the kernel kills everything in
# it: containers, shims and all.
start_node_namespace() {
  start node unshare --pid --kill-child=KILL --mount-proc --propagation slave \
    bash -c 'trap "exit 0" TERM; while :; do sleep 3600 & wait; done' # reaps the shims it adopts
  wait_for "the node's namespace" 10 pgrep -P "$(cat "$state/pids/node")"
  pgrep -P "$(cat "$state/pids/node")" >"$state/pids/node-init"
}

# start_in_node NAME BINARY ARGS...: start, in the node's namespace.
start_in_node() {
  local name=$1
  shift
  start "$name" nsenter --target="$(cat "$state/pids/node-init")" --mount --pid -- "$@"
}

# wait_for WHAT SECONDS COMMAND...: polls COMMAND every half second; on timeout shows the logs.
wait_for() {
  local what=$1 deadline=$((SECONDS + $2))
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS > deadline)); then
      log "timed out waiting for $what; last log lines:"
      for f in "$state"/logs/*.log; do echo "--- $f" >&2; tail -n 15 "$f" >&2; done
      return 1
    fi
    sleep 0.5
  done
}

kubectl() { "$(binaries_dir)/kubectl" --kubeconfig "$state/admin.kubeconfig" "$@"; }

node_ready() { [ "$(kubectl get node "$node_name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }

bring_up() {
  local impl=$1 t=$SECONDS bin
  bin=$(binaries_dir)
  mkdir -p "$state/logs" "$state/pids" "$state/pod-logs" "$kubelet_root"
  echo $$ >"$state/supervisor.pid"
  echo "$impl" >"$state/impl"
  pki
  network
  containerd_config
  kubelet_config
  proxy_config

  start_node_namespace
  start_in_node containerd containerd --config "$state/containerd/config.toml"
  wait_for containerd 30 ctr --address "$state/containerd/containerd.sock" version
  "$here/images.sh" import --address "$state/containerd/containerd.sock" "${images[@]}" >&2

  start etcd "$bin/etcd" --data-dir="$state/etcd" --listen-client-urls="http://127.0.0.1:$etcd_port" \
    --advertise-client-urls="http://127.0.0.1:$etcd_port" --listen-peer-urls="http://127.0.0.1:$((etcd_port + 10))" \
    --initial-advertise-peer-urls="http://127.0.0.1:$((etcd_port + 10))" \
    --initial-cluster="default=http://127.0.0.1:$((etcd_port + 10))" --unsafe-no-fsync --log-level=warn
  local p=$state/pki
  start kube-apiserver "$bin/kube-apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" \
    --bind-address="$node_ip" --advertise-address="$node_ip" --secure-port=6443 \
    --tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" --client-ca-file="$p/ca.crt" \
    --kubelet-client-certificate="$p/apiserver-kubelet-client.crt" --kubelet-client-key="$p/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$p/ca.crt" --kubelet-preferred-address-types=InternalIP \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$p/sa.pub" \
    --service-account-signing-key-file="$p/sa.key" --service-cluster-ip-range="$service_cidr" \
    --allow-privileged=true
  wait_for kube-apiserver 120 kubectl get --raw /readyz
  # The apiserver-kubelet-client certificate's group may use the kubelet API (kubeadm's binding).
  kubectl create clusterrolebinding kubeadm:cluster-admins --clusterrole=cluster-admin --group=kubeadm:cluster-admins >/dev/null

  if [ "$impl" = kcm ]; then echo "$kcm_controllers_kcm"; else echo "$kcm_controllers_kvc"; fi >"$state/kcm-controllers"
  start kube-controller-manager "$here/cluster.sh" run-kcm "$bin/kube-controller-manager" \
    --kubeconfig="$state/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig="$state/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig="$state/kube-controller-manager.kubeconfig" --leader-elect=false --bind-address=127.0.0.1 --secure-port=10257 \
    --cert-dir="$state/kcm-certs" --use-service-account-credentials=true \
    --service-account-private-key-file="$p/sa.key" --root-ca-file="$p/ca.crt" \
    --cluster-signing-cert-file="$p/ca.crt" --cluster-signing-key-file="$p/ca.key"
  start kube-scheduler "$bin/kube-scheduler" --kubeconfig="$state/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig="$state/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig="$state/kube-scheduler.kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port=10259
  start kube-proxy "$bin/kube-proxy" --config="$state/kube-proxy.yaml"
  start_in_node kubelet "$bin/kubelet" --config="$state/kubelet.yaml" --kubeconfig="$state/kubelet.kubeconfig" \
    --root-dir="$kubelet_root" --cert-dir="$state/kubelet-certs" --hostname-override="$node_name" \
    --node-ip="$node_ip"
  wait_for "node $node_name to be Ready" 120 node_ready
  log "control plane and node ready ($(mmss $((SECONDS - t))))"

  [ -f "$state/kvc-image.tar" ] && import_kvc_image
  [ "$impl" = kvc ] && deploy_kvc
  deploy_csi_hostpath
  log "cluster up ($(mmss $((SECONDS - t))), impl=$impl)"
}

# kvc's image, built from the Dockerfile as users build it (test/image/build-image.ts, as the image
# test builds it), saved and imported into the node's containerd.
kvc_image=docker.io/library/kube-volume-controller:e2e
build_kvc_image() {
  local t=$SECONDS
  export CONTAINERS_CONF=${CONTAINERS_CONF:-$repo/test/image/containers.conf}
  "$repo/node_modules/.bin/tsx" test/image/build-image.ts "$kvc_image" >&2
  podman save --format=docker-archive -o "$state/kvc-image.tar" "$kvc_image" 2>/dev/null
  log "kvc image built ($(mmss $((SECONDS - t))))"
}

import_kvc_image() {
  ctr --address "$state/containerd/containerd.sock" -n k8s.io images import "$state/kvc-image.tar" >/dev/null
}

deploy_kvc() {
  local image=$kvc_image
  # The kustomization orders the objects (the Namespace first), as a user's `kubectl apply -k` does.
  kubectl kustomize manifests/ | sed "s|image: kube-volume-controller:[^ ]*|image: $image|" | kubectl apply -f - >/dev/null
  kubectl -n kube-volume-controller rollout status deploy/kube-volume-controller --timeout=180s >&2
}

deploy_csi_hostpath() {
  "$repo/node_modules/.bin/tsx" "$here/deploy-csi-hostpath.ts" \
    --kubectl="$(binaries_dir)/kubectl" --kubeconfig="$state/admin.kubeconfig" >&2
}

# run-kcm BINARY ARGS...: KCM with the --controllers line in $state/kcm-controllers, started again
# with the line then there when `cluster.sh kcm-controllers` asks: this cluster's stand-in for kubeadm
# re-creating KCM's static pod with new flags (KCM is no pod here). Any other exit ends it, and with it
# the cluster.
run_kcm() {
  local rc
  while :; do
    rm -f "$state/kcm-restart"
    setpriv --pdeathsig KILL -- "$@" --controllers="$(cat "$state/kcm-controllers")" &
    echo $! >"$state/pids/kcm-process"
    rc=0
    wait $! || rc=$?
    [ -f "$state/kcm-restart" ] || exit "$rc"
    log "restarting kube-controller-manager with --controllers=$(cat "$state/kcm-controllers")"
  done
}

# --- commands -------------------------------------------------------------------------------------

supervise() {
  local impl=$1
  trap 'trap - TERM INT EXIT; cleanup; exit 143' TERM INT
  trap 'trap - TERM INT EXIT; cleanup' EXIT
  mkdir -p "$state/pids"
  # The reaper: in its own session (a process-group kill of our caller cannot reach it) and under
  # pdeathsig, so that the supervisor's death by any signal, SIGKILL included, still takes it down.
  setpriv --pdeathsig TERM -- setsid env KVC_CLUSTER_REAPER=1 bash -c "trap '\"$0\" down; exit' TERM; while :; do setpriv --pdeathsig KILL sleep 3600 & wait \$!; done" \
    </dev/null >/dev/null 2>&1 &
  echo $! >"$state/pids/reaper"
  bring_up "$impl"
  echo "ready" >"$state/ready"
  echo "KUBECONFIG=$state/admin.kubeconfig"
  # Watch the daemons: the first to exit takes the cluster down (a half cluster is no cluster).
  local died
  wait -n $(cat "$state"/pids/{node,containerd,etcd,kube-apiserver,kube-controller-manager,kube-scheduler,kube-proxy,kubelet}) || true
  for n in node containerd etcd kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet; do
    kill -0 "$(cat "$state/pids/$n")" 2>/dev/null || died=$n
  done
  log "${died:-a daemon} exited; last lines of its log:"
  tail -n 20 "$state/logs/${died:-kubelet}.log" >&2
  exit 1
}

cmd=${1:-}
shift || true
if [ "$cmd" = run-kcm ]; then
  run_kcm "$@"
fi
impl=kvc detach=${KEEP:-0} with_kvc_image=0
names=()
for arg in "$@"; do
  case $arg in
  --impl=kvc | --impl=kcm) impl=${arg#--impl=} ;;
  --detach) detach=1 ;;
  --kvc-image) with_kvc_image=1 ;;
  -*) echo "cluster.sh: unknown argument $arg" >&2; exit 2 ;;
  *)
    [[ $cmd == import || ($cmd == kcm-controllers && ${#names[@]} == 0) ]] ||
      { echo "cluster.sh: unknown argument $arg" >&2; exit 2; }
    names+=("$arg")
    ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "cluster.sh: needs root (containerd, kubelet, the bridge)" >&2; exit 1; }

case $cmd in
up)
  cleanup 2>/dev/null # what a killed run left
  build_all
  mkdir -p "$state"
  [ "$impl" = kvc ] || [ "$with_kvc_image" = 1 ] && build_kvc_image
  if [ "$detach" = 1 ]; then
    setsid "$0" supervise "--impl=$impl" </dev/null >"$state.supervisor.log" 2>&1 &
    until [ -f "$state/ready" ]; do
      kill -0 $! 2>/dev/null || { cat "$state.supervisor.log" >&2; exit 1; }
      sleep 1
    done
    echo "KUBECONFIG=$state/admin.kubeconfig"
  else
    supervise "$impl"
  fi
  ;;
build) build_all ;;
import)
  [ -f "$state/ready" ] || { echo "cluster.sh: no cluster is up" >&2; exit 1; }
  "$here/images.sh" import --address "$state/containerd/containerd.sock" "${names[@]}" >&2
  ;;
supervise) supervise "$impl" ;;
kcm-controllers)
  [ -f "$state/ready" ] || { echo "cluster.sh: no cluster is up" >&2; exit 1; }
  [ ${#names[@]} = 1 ] || { echo "usage: cluster.sh kcm-controllers LINE" >&2; exit 2; }
  printf '%s\n' "${names[0]}" >"$state/kcm-controllers"
  touch "$state/kcm-restart"
  kill -TERM "$(cat "$state/pids/kcm-process")"
  ;;
down) cleanup ;;
kubeconfig)
  [ -f "$state/ready" ] || { echo "cluster.sh: no cluster is up" >&2; exit 1; }
  echo "$state/admin.kubeconfig"
  ;;
*)
  echo "usage: cluster.sh up [--impl=kvc|kcm] [--kvc-image] [--detach] | down | kubeconfig | kcm-controllers LINE" >&2
  exit 2
  ;;
esac
