/**
 * kube-controller-manager's command line in a kubeadm static-pod manifest (v1.37, with a pod network
 * and a cluster name: cmd/kubeadm/app/phases/controlplane/manifests.go, getControllerManagerCommand;
 * kubeadm sorts the flags by name), with the given files standing in for /etc/kubernetes.
 */
export function kubeadmKcmFlags(files: { kubeconfig: string; caFile: string; keyFile: string }): string[] {
  return [
    "--allocate-node-cidrs=true",
    `--authentication-kubeconfig=${files.kubeconfig}`,
    `--authorization-kubeconfig=${files.kubeconfig}`,
    "--bind-address=127.0.0.1",
    `--client-ca-file=${files.caFile}`,
    "--cluster-cidr=10.244.0.0/16",
    "--cluster-name=kubernetes",
    `--cluster-signing-cert-file=${files.caFile}`,
    `--cluster-signing-key-file=${files.keyFile}`,
    "--controllers=*,bootstrapsigner,tokencleaner",
    `--kubeconfig=${files.kubeconfig}`,
    "--leader-elect=true",
    `--requestheader-client-ca-file=${files.caFile}`,
    `--root-ca-file=${files.caFile}`,
    `--service-account-private-key-file=${files.keyFile}`,
    "--service-cluster-ip-range=10.96.0.0/12",
    "--use-service-account-credentials=true",
  ];
}
