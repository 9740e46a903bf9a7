# Sourced by deploy/build-image.sh and scripts/container-test.sh: picks the
# container engine and sets CT (an array: the engine's command and its
# global flags) and CT_NAME (podman or docker).
#
# podman is preferred; it is installed with apt-get (with runc) when
# neither podman nor a reachable docker daemon is there. With podman, runc
# is the OCI runtime when it is installed: crun refuses every container on
# a host with hybrid (v1 + v2) cgroups. deploy/podman/containers.conf is
# read through CONTAINERS_CONF (podman's default ulimits can exceed a
# machine's hard limits).
#
# ct_pick returns 0 with CT set, or 1 (with a reason on stderr) when no
# engine is there and none can be installed.

ct_deploy_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

ct_pick() {
	if ! command -v podman >/dev/null 2>&1 && ! { command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; }; then
		if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
			echo "container-runtime: installing podman and runc with apt-get" >&2
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc >/dev/null 2>&1 ||
				{ apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc >/dev/null 2>&1; } ||
				{ echo "container-runtime: apt-get install podman runc failed" >&2; }
		fi
	fi
	if command -v podman >/dev/null 2>&1; then
		CT_NAME=podman
		CT=(podman)
		if [ -z "${CONTAINERS_CONF:-}" ]; then
			export CONTAINERS_CONF="$ct_deploy_dir/podman/containers.conf"
		fi
		if command -v runc >/dev/null 2>&1; then
			CT+=(--runtime "$(command -v runc)")
		fi
		return 0
	fi
	if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
		CT_NAME=docker
		CT=(docker)
		return 0
	fi
	echo "container-runtime: neither podman nor a reachable docker daemon, and podman could not be installed (needs root and apt-get)" >&2
	return 1
}
