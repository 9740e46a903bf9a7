// Package k8stest runs the project's Kubernetes manifests on a real
// single-node cluster: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, containerd with runc and the kubelet, built from source
// by scripts/k8s-build.sh, inside the k8s-node VM shape (vmtest), where
// the kubelet may manage the guest's own cgroups, mounts and network.
//
// Its tests carry the k8stest build tag, so go test ./... on a host has
// nothing to run here: make k8stest builds them with the tag and boots the
// shape with the cluster's programs as a payload (scripts/k8stest.sh).
// docs/decisions/0088 says why the node is a VM and not a container.
package k8stest
