#!/usr/bin/env bash
# Upstream's own e2e storage tests (k8s.io/kubernetes test/e2e/storage at the pinned release, built as
# e2e.test by test/control-plane/build.sh) on the real cluster of test/e2e/cluster, with kvc in KCM's
# loops' place (--impl=kvc) or KCM's own loops (--impl=kcm). See docs/e2e.md.
#
#   run.sh [--impl=kvc|kcm] [--focus=REGEX] [--skip=REGEX] [--procs=N] [--list] [-- e2e.test flags...]
#
# Brings the cluster up (detached) unless one with the same implementation is up, imports the images
# e2e's pods run, makes csi-hostpath-wffc the default StorageClass (as kind's "standard"), and runs
# e2e.test with --provider=skeleton under the ginkgo CLI: N processes (default 3) share the parallel
# specs, and the [Serial] ones run afterwards alone, as upstream's hack/ginkgo-e2e.sh does. The JUnit
# report and logs go to ${KVC_E2E_REPORT_DIR:-/tmp/kvc-e2e-report}/<impl>. --list prints the selected
# tests and exits.
set -euo pipefail
cd "$(dirname "$0")/../../.."
repo=$PWD
export PATH="$repo/node_modules/.bin:$PATH"
impl=kvc focus="" skip="" list=0 procs=3
extra=()
while [ $# -gt 0 ]; do
  case $1 in
  --impl=kvc | --impl=kcm) impl=${1#--impl=} ;;
  --focus=*) focus=${1#--focus=} ;;
  --skip=*) skip=${1#--skip=} ;;
  --procs=[1-9]*) procs=${1#--procs=} ;;
  --list) list=1 ;;
  --)
    shift
    extra=("$@")
    break
    ;;
  *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
# The selection (docs/e2e.md): [sig-storage] tests of the PV binder, attach/detach and protection that
# run on one node without NFS, iSCSI, a cloud, SSH, snapshots or a second node.
focus=${focus:-$(sed -n 's/^focus: //p' test/e2e/upstream/selection.txt)}
skip=${skip:-$(sed -n 's/^skip: //p' test/e2e/upstream/selection.txt)}

bin=$(test/control-plane/build.sh kubectl e2e.test ginkgo | tail -1)
suite=(--provider=skeleton --kubectl-path="$bin/kubectl" --repo-root=)
if [ "$list" = 1 ]; then
  # --list-tests ignores focus and skip; a dry run applies them (each name is followed by its labels).
  "$bin/e2e.test" "${suite[@]}" "--ginkgo.focus=$focus" "--ginkgo.skip=$skip" --ginkgo.dry-run --ginkgo.v \
    --ginkgo.no-color "${extra[@]}" | sed -n 's/^\(\[sig-storage\] .*\) \[sig-storage[^]]*\]$/\1/p' | sort
  exit
fi

state=${KVC_CLUSTER_DIR:-/tmp/kvc-cluster}
if [ "$(cat "$state/impl" 2>/dev/null)" != "$impl" ] || [ ! -f "$state/ready" ]; then
  test/e2e/cluster/cluster.sh up "--impl=$impl" --detach
fi
test/e2e/cluster/cluster.sh import agnhost nginx glibc-dns-testing
export KUBECONFIG=$state/admin.kubeconfig
"$bin/kubectl" annotate --overwrite storageclass csi-hostpath-wffc storageclass.kubernetes.io/is-default-class=true >/dev/null

report=${KVC_E2E_REPORT_DIR:-/tmp/kvc-e2e-report}/$impl
rm -rf "$report"
mkdir -p "$report"
start=$SECONDS
status=0
"$bin/ginkgo" --procs="$procs" "--focus=$focus" "--skip=$skip" --timeout=6h --no-color \
  --junit-report=junit.xml --output-dir="$report" "$bin/e2e.test" -- "${suite[@]}" --kubeconfig="$KUBECONFIG" \
  --report-dir="$report" "${extra[@]}" 2>&1 | tee "$report/e2e.log" || status=$?
echo "e2e ($impl): $((SECONDS - start)) s, exit $status, report $report/junit.xml" >&2
exit "$status"
