#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
#   devtools/dpdk-sdk-headers.sh
#
# Prints the folder that holds DPDK's driver-SDK headers (bus_vdev_driver.h, bus_driver.h,
# dev_driver.h) of exactly the installed libdpdk-dev version, for meson's -Ddpdk_sdk_headers=DIR
# (the vdev, drivers/mlx5_qpn/dev/mlx5_qpn_vdev.cpp, needs them). Debian's libdpdk-dev leaves
# them out (DPDK installs them only with -Denable_driver_sdk=true); Debian's source package
# `dpdk` of the same version has them. This script fetches that source package through a private
# apt configuration (its own sources list, lists and cache: nothing of the system's apt changes),
# checks that the package's version is the installed one, and keeps only those headers in
#   ${XDG_CACHE_HOME:-~/.cache}/mlx5-qpn/dpdk-sdk-VERSION/include     (VERSION: dpkg's, e.g. 22.11.11-0+deb12u1)
# (a second run finds them there and fetches nothing). The source package (about 20 MB) is deleted
# once the headers are out.
#
# Prints nothing (exit 0) where the installed DPDK has the SDK already (a DPDK built from source
# with it). Exits 1 with one line on stderr where the headers cannot be had (no libdpdk-dev from
# dpkg, no network, no such version on the mirror): the rest of the project builds without the vdev.
# QPN_DEBIAN_MIRROR (default http://deb.debian.org) names another mirror.
set -euo pipefail

say() { echo "dpdk-sdk-headers: $*" >&2; }
fail() {
	say "$* (the mlx5_qpn vdev is not built; everything else is)"
	exit 1
}
sdk_headers=(bus_vdev_driver.h bus_driver.h dev_driver.h)

incdir=$(pkg-config --variable=includedir libdpdk 2>/dev/null) || fail "pkg-config finds no libdpdk"
for d in "$incdir" "$incdir/dpdk"; do
	[ -f "$d/bus_vdev_driver.h" ] && exit 0 # this DPDK installs its driver SDK
done

version=$(dpkg-query -W -f='${Version}' libdpdk-dev 2>/dev/null) || true
[ -n "$version" ] || fail "libdpdk-dev is not installed by dpkg (no Debian source package to match)"
# The upstream version ("22.11.11") must be the one pkg-config gives for the installed DPDK.
upstream=${version#*:}
upstream=${upstream%%-*}
[ "$upstream" = "$(pkg-config --modversion libdpdk)" ] ||
	fail "libdpdk-dev $version is not pkg-config's libdpdk $(pkg-config --modversion libdpdk)"

cache=${XDG_CACHE_HOME:-$HOME/.cache}/mlx5-qpn/dpdk-sdk-$version
stamp=$cache/include/VERSION
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$version" ]; then
	echo "$cache/include"
	exit 0
fi

. /etc/os-release
codename=${VERSION_CODENAME:-}
[ -n "$codename" ] || fail "/etc/os-release names no release codename"
mirror=${QPN_DEBIAN_MIRROR:-http://deb.debian.org}

work=$(mktemp -d "${TMPDIR:-/tmp}/dpdk-sdk.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/src"
# A stable point release's version lives in the release's suite, a security fix in -security.
cat >"$work/sources.list" <<EOF
deb-src $mirror/debian $codename main
deb-src $mirror/debian $codename-updates main
deb-src $mirror/debian-security $codename-security main
EOF
apt_opts=(-o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
	-o Dir::State::Lists="$work/lists" -o Dir::Cache="$work/cache" -o APT::Sandbox::User="$(id -un)"
	-o Debug::NoLocking=1)
say "fetching Debian's source package dpdk=$version (driver-SDK headers, about 20 MB)"
apt-get "${apt_opts[@]}" -qq update >"$work/apt.log" 2>&1 ||
	fail "apt-get update on $mirror failed: $(tail -1 "$work/apt.log")"
# apt-get update exits 0 when it reaches no server (its warnings say so): no index, no source.
ls "$work"/lists/*Sources* >/dev/null 2>&1 ||
	fail "no source index from $mirror (no network?): $(grep -m1 '^[WE]:' "$work/apt.log")"
(cd "$work/src" && apt-get "${apt_opts[@]}" -qq source --download-only "dpdk=$version") \
	>>"$work/apt.log" 2>&1 || fail "no source package dpdk=$version on $mirror: $(tail -1 "$work/apt.log")"

dsc=$(ls "$work"/src/dpdk_*.dsc)
# apt-get checked the files against the signed Release file; the .dsc names the version too.
dsc_version=$(sed -n 's/^Version: //p' "$dsc")
[ "$dsc_version" = "$version" ] || fail "source package version $dsc_version is not $version"
# Only the headers (and VERSION) out of the upstream tarball, then those of Debian's patches
# (debian/patches/series, in order) that touch one of them.
orig=$(ls "$work"/src/dpdk_*.orig.tar.* | head -1)
tar -C "$work/src" -xf "$orig" --wildcards --no-anchored "${sdk_headers[@]/#/*/}" \
	'*/VERSION' 2>/dev/null || fail "the source package holds no ${sdk_headers[*]}"
root=$(find "$work/src" -mindepth 1 -maxdepth 1 -type d | head -1)
debian_tar=$(ls "$work"/src/dpdk_*.debian.tar.* | head -1)
tar -C "$root" -xf "$debian_tar" debian/patches 2>/dev/null || true
touched=$(IFS='|' && echo "${sdk_headers[*]}")
if [ -f "$root/debian/patches/series" ]; then
	while read -r p _; do
		case "$p" in '' | '#'*) continue ;; esac
		grep -qE "^\+\+\+ .*/($touched)" "$root/debian/patches/$p" || continue
		patch -d "$root" -p1 -s <"$root/debian/patches/$p" ||
			fail "Debian patch $p does not apply to the headers"
	done <"$root/debian/patches/series"
fi
[ "$(cat "$root/VERSION")" = "$upstream" ] ||
	fail "the source's VERSION $(cat "$root/VERSION") is not $upstream"

mkdir -p "$cache.tmp/include"
for h in "${sdk_headers[@]}"; do
	f=$(find "$root" -name "$h" -path '*/lib/*' -o -name "$h" -path '*/drivers/bus/*' | head -1)
	[ -n "$f" ] || fail "the source package holds no $h"
	cp "$f" "$cache.tmp/include/"
done
echo "$version" >"$cache.tmp/include/VERSION"
rm -rf "$cache"
mv "$cache.tmp" "$cache"
say "driver-SDK headers of DPDK $version in $cache/include"
echo "$cache/include"
