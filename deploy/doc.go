// Package deploy holds no code. It is where the files for running
// b10x-harness in containers live, and its tests check them:
//
//   - seccomp/: the seccomp profile for containers (package seccomp and its
//     generator build and check it);
//   - k8s/: Kubernetes manifests in YAML: the evaluation as a kustomization
//     (base/: an indexed Job, its records volume, and the ConfigMap of its
//     policy and tasks made from base/eval/; overlays/example/ changes N,
//     the image and the policy), and Actions Runner Controller's runner
//     scale set values with a workflow for it. The tests read them with
//     sigs.k8s.io/yaml, strictly, and build the kustomizations with a
//     checker of their own (kustomize is not a dependency);
//   - build-image.sh, container-runtime.sh, podman/: the image build
//     behind `make image` (the Containerfile is at the module root).
//
// docs/containers.md says what a cluster needs and how records are gathered.
package deploy
