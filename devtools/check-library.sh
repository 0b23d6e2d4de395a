#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
#   devtools/check-library.sh SOURCE_DIR BUILD_DIR
#
# The library face, checked from outside as an application sees it (run by the test command):
#  1. libmlx5_qpn.so exports exactly the functions (and the variables the inline fast path reads)
#     of the installed headers (node MLX5_QPN_0)
#     plus the INTERNAL node of config/mlx5_qpn.map if there is one (today: none), and nothing
#     else;
#  2. it carries a versioned SONAME, and its file name begins with it;
#  3. installed with `meson install`, the README's C snippet (`#include <mlx5_qpn/mlx5_qpn.h>`)
#     compiles and links as C11 with -Wall -Wextra -Werror through `pkg-config mlx5-qpn`;
#  4. a C caller of every deprecated name compiles there with one warning naming the successor
#     of each, and runs with the answers of the successors.
set -euo pipefail
src=$1
build=$2
fail=0
headers=(lib/pool/mlx5_qpn_pool.h lib/pool/mlx5_qpn_pool_core.h lib/cm/mlx5_qpn_cm.h drivers/mlx5_qpn/mlx5_qpn.h
	 drivers/mlx5_qpn/mlx5_qpn_dc.h)
# The file the development link points at (a stale libmlx5_qpn.so.X.Y.Z of an older build may lie
# beside it).
so=$(readlink -f "$build/libmlx5_qpn.so")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Functions declared in the installed headers: declarations start at column 0.
(cd "$src" && grep -hoE '^[A-Za-z_][A-Za-z0-9_ ]*[ *]mlx5_qpn_[a-z0-9_]+\(' "${headers[@]}") |
	grep -oE 'mlx5_qpn_[a-z0-9_]+\($' | tr -d '(' > "$tmp/public"
# Variables the inline functions read (declared `extern ...` at column 0, e.g. the thread's binding).
(cd "$src" && grep -hoE '^extern [A-Za-z0-9_ ]*[ *]mlx5_qpn_[a-z0-9_]+' "${headers[@]}") |
	grep -oE 'mlx5_qpn_[a-z0-9_]+$' >> "$tmp/public"
sort -u -o "$tmp/public" "$tmp/public"
awk '/^MLX5_QPN_0/,/^}/' "$src/config/mlx5_qpn.map" | grep -oE '^\s+mlx5_qpn_[a-z0-9_]+;' |
	tr -d ' \t;' | sort -u > "$tmp/map_public"
{ awk '/^INTERNAL/,/^}/' "$src/config/mlx5_qpn.map" | grep -oE '^\s+mlx5_qpn_[a-z0-9_]+;' || true; } |
	tr -d ' \t;' | sort -u > "$tmp/map_internal"
nm -D --defined-only "$so" | awk '$2 ~ /^[TWDBRV]$/ {print $3}' | sed 's/@.*//' | sort -u > "$tmp/exported"
cat "$tmp/public" "$tmp/map_internal" | sort -u > "$tmp/expected"

if ! diff -q "$tmp/public" "$tmp/map_public" >/dev/null; then
	echo "check-library: config/mlx5_qpn.map and the installed headers disagree:"
	diff "$tmp/public" "$tmp/map_public" | sed -n 's/^</  declared, not in the map:/p; s/^>/  in the map, not declared:/p'
	fail=1
fi
if ! diff -q "$tmp/expected" "$tmp/exported" >/dev/null; then
	echo "check-library: $so exports other symbols than the API:"
	diff "$tmp/expected" "$tmp/exported" | sed -n 's/^</  missing:/p; s/^>/  extra:/p' | head -20
	fail=1
fi
echo "check-library: $(wc -l < "$tmp/exported") exported symbols ($(wc -l < "$tmp/public") public, $(wc -l < "$tmp/map_internal") internal)"

soname=$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
if ! [[ "$soname" =~ ^libmlx5_qpn\.so\.[0-9]+$ ]]; then
	echo "check-library: SONAME '$soname' is not versioned"
	fail=1
fi
# The file is named for its SONAME (libmlx5_qpn.so.2 -> libmlx5_qpn.so.2.x.y), so that ldconfig's
# link and the file agree on the ABI.
if [[ "$(basename "$so")" != "$soname".* ]]; then
	echo "check-library: the file $(basename "$so") does not carry its SONAME '$soname'"
	fail=1
fi

# Install into a scratch root and build the README's snippet against it, as a user would.
DESTDIR="$tmp/root" meson install -C "$build" --quiet --no-rebuild >/dev/null
prefix=$(meson introspect "$build" --buildoptions | python3 -c \
	'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"][0])')
pcdir=$(dirname "$(find "$tmp/root" -name mlx5-qpn.pc | head -1)")
cat > "$tmp/app.c" <<'C'
#include <rte_eal.h>
#include <mlx5_qpn/mlx5_qpn.h>

int main(int argc, char **argv)
{
	if (rte_eal_init(argc, argv) < 0)
		return 1;
	struct mlx5_qpn_dev *dev = NULL;
	uint32_t qpn;
	if (mlx5_qpn_dev_probe("sim0,quarantine_us=2000000", &dev) == 0) {
		if (mlx5_qpn_reserved_alloc(dev, &qpn) == 0) {
			/* ... conn_param.qp_num = qpn; rdma_connect(...) ... */
			mlx5_qpn_reserved_dealloc(dev, qpn);
		}
		mlx5_qpn_dev_close(dev);
	}
	rte_eal_cleanup();
	return 0;
}
C
# Our .pc relocated to the scratch root and without its Requires (so that DPDK's own .pc is
# read as installed), then DPDK's flags.
mkdir -p "$tmp/pc"
sed -e "s|^prefix=.*|prefix=$tmp/root$prefix|" -e '/^Requires/d' "$pcdir/mlx5-qpn.pc" > "$tmp/pc/mlx5-qpn.pc"
flags="$(PKG_CONFIG_PATH="$tmp/pc" pkg-config --cflags --libs mlx5-qpn) $(pkg-config --cflags --libs libdpdk)"
libdir=$(dirname "$(find "$tmp/root" -name 'libmlx5_qpn.so' | head -1)")
flags="$flags -Wl,-rpath,$libdir"
# shellcheck disable=SC2086
if ! cc -std=c11 -Wall -Wextra -Werror "$tmp/app.c" -o "$tmp/app" $flags 2> "$tmp/cc.err"; then
	echo "check-library: the README's snippet does not build against the installed library:"
	head -20 "$tmp/cc.err"
	fail=1
fi

# A C caller of each deprecated name (the 2.1 ABI's) builds against the installed headers with one
# warning per old name that names its successor, and works: the aliases are the same functions.
cat > "$tmp/old.c" <<'C'
#include <errno.h>
#include <string.h>
#include <mlx5_qpn/mlx5_qpn_dc.h>
#include <mlx5_qpn/mlx5_qpn_cm.h>

int main(void)
{
	struct mlx5_qpn_dc_ah *ah = NULL;
	struct mlx5_qpn_cm_shm_service svc;
	struct mlx5_qpn_cm_transport tp;
	int bad = 0;

	memset(&svc, 0, sizeof(svc));
	svc.dct_number = 7;
	bad |= mlx5_qpn_dc_ah_create(NULL, NULL, &ah) != -EINVAL;
	mlx5_qpn_dc_ah_destroy(ah);
	bad |= mlx5_qpn_dct_number(NULL) != 0;
	bad |= mlx5_qpn_dev_get(NULL) != NULL;
	bad |= mlx5_qpn_cm_shm_attach(NULL, 1, &tp) != -EINVAL;
	bad |= mlx5_qpn_cm_shm_detach(NULL, 1) != -EINVAL;
	bad |= mlx5_qpn_cm_shm_drops(NULL) != 0;
	bad |= mlx5_qpn_cm_shm_publish(NULL, &svc) != -EINVAL;
	bad |= mlx5_qpn_cm_shm_lookup(NULL, 1, &svc, 1) != -EINVAL;
	bad |= mlx5_qpn_cm_shm_unlink("") != -EINVAL;
	return bad || svc.dct_qpn != 7;
}
C
# shellcheck disable=SC2086
if ! cc -std=c11 -Wall -Wextra -Werror -Wno-error=deprecated-declarations "$tmp/old.c" \
	-o "$tmp/old" $flags 2> "$tmp/old.err"; then
	echo "check-library: a caller of the deprecated names does not build:"
	head -20 "$tmp/old.err"
	fail=1
elif ! "$tmp/old"; then
	echo "check-library: a deprecated name answers unlike its successor"
	fail=1
else
	for use in mlx5_qpn_ah_create mlx5_qpn_ah_destroy mlx5_qpn_dct_qpn mlx5_qpn_dev_lookup \
		mlx5_qpn_cm_shm_fabric_attach mlx5_qpn_cm_shm_fabric_detach \
		mlx5_qpn_cm_shm_fabric_drops mlx5_qpn_cm_shm_fabric_publish \
		mlx5_qpn_cm_shm_fabric_lookup mlx5_qpn_cm_shm_fabric_unlink; do
		if ! grep -q "deprecated: use $use()" "$tmp/old.err"; then
			echo "check-library: no deprecation warning naming $use()"
			fail=1
		fi
	done
	if ! grep -q "deprecated: use dct_qpn" "$tmp/old.err"; then
		echo "check-library: no deprecation warning naming the field dct_qpn"
		fail=1
	fi
fi
[ $fail -eq 0 ] && echo "check-library: OK"
exit $fail
