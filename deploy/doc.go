// Package deploy holds no code. It is where the files for running
// b10x-harness in containers live, and its tests check them:
//
//   - seccomp/: the seccomp profile for containers (package seccomp and its
//     generator build and check it);
//   - k8s/: Kubernetes manifests (an indexed evaluation Job, its records
//     volume, an Actions Runner Controller runner scale set and a workflow
//     for it), written as YAML in JSON's syntax so that the tests parse
//     them with encoding/json;
//   - build-image.sh, container-runtime.sh, podman/: the image build
//     behind `make image` (the Containerfile is at the module root).
//
// docs/containers.md says what a cluster needs and how records are gathered.
package deploy
