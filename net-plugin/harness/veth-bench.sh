#!/usr/bin/env bash
# veth-bench.sh: the plugin's harness benchmark (8 x 512 KiB in flight, then
# small-message latency) between two network namespaces joined by one veth
# pair, for each backend: the plugin over a real link with an MTU, where the
# loopback benchmark has 64 KiB datagrams and no link rate. Needs root and
# iproute2; builds the plugin and the harness first.
#
# usage: net-plugin/harness/veth-bench.sh [MTU] [ROUNDS]   (default 1500, 2)
set -euo pipefail
mtu=${1:-1500}
rounds=${2:-2}
case "$mtu$rounds" in *[!0-9]*) echo "veth-bench.sh: MTU and ROUNDS are whole numbers" >&2; exit 2 ;; esac
if [ "$(id -u)" != 0 ]; then
	echo "veth-bench.sh: needs root (network namespaces)" >&2
	exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
make --no-print-directory plugin harness >/dev/null
ns=mrvb$$
a=${ns}a b=${ns}b
cleanup() {
	ip netns del "$a" 2>/dev/null || true
	ip netns del "$b" 2>/dev/null || true
	ip link del "${ns}x" 2>/dev/null || true # if it never left this namespace
}
trap cleanup EXIT
trap 'exit 1' INT TERM
ip netns add "$a"
ip netns add "$b"
ip link add "${ns}x" mtu "$mtu" type veth peer name "${ns}y" mtu "$mtu"
ip link set "${ns}x" netns "$a"
ip link set "${ns}y" netns "$b"
ip -n "$a" addr add 10.99.0.1/24 dev "${ns}x"
ip -n "$b" addr add 10.99.0.2/24 dev "${ns}y"
for n in "$a" "$b"; do ip -n "$n" link set lo up; done
ip -n "$a" link set "${ns}x" up
ip -n "$b" link set "${ns}y" up
echo "# veth MTU $mtu; harness bench (goodput of 8 x 512 KiB in flight), $rounds round(s) per backend"
for r in $(seq "$rounds"); do
	for be in udp tcp; do
		out=$(ip netns exec "$a" env METAROCE_BACKEND="$be" METAROCE_IFNAMES="=${ns}x,${ns}y" \
			HARNESS_SENDER_NETNS="$b" NCCL_DEBUG=WARN timeout 120 build/nccl-net-harness build/libnccl-net.so bench 2>&1) || {
			echo "$out" >&2
			exit 1
		}
		gp=$(echo "$out" | grep -o 'goodput_GBps=[0-9.]*' || true)
		lat=$(echo "$out" | grep -o 'isend_test_latency_us=[0-9.]*' || true)
		if [ -z "$gp" ] || [ -z "$lat" ]; then
			echo "veth-bench.sh: the $be harness printed no result:" >&2
			echo "$out" >&2
			exit 1
		fi
		echo "$be $gp $lat"
	done
done
