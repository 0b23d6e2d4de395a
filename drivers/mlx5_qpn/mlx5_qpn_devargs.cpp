/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Devargs: "sim0,key=value,..." or "ib=mlx5_0,key=value,...". rte_kvargs splits the list; the
 * allow-list, duplicates, empty values and ranges are checked here so that every refusal can
 * name the key and the value in one log line (rte_kvargs_parse() with a key list only says no).
 */
#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <string>

#include <rte_kvargs.h>
#include <rte_log.h>

#include "mlx5_qpn_dev_log.h"
#include "mlx5_qpn_devargs.h"

namespace {

enum class Kind { kUint, kGuid, kPolicy, kCores, kName };

struct Key {
	const char *name;
	Kind kind;
	uint64_t min, max;
	bool sim_only;
	size_t off;    /* offset of the field in mlx5_qpn_devargs */
	size_t width;  /* 4 or 8 bytes (kUint/kGuid) */
};

#define U32(f, lo, hi, sim) {#f, Kind::kUint, lo, hi, sim, offsetof(mlx5_qpn_devargs, f), 4}

/* The allow-list. Ranges follow the PRM field widths and what the emulated device can model. */
const Key kKeys[] = {
	{"ib", Kind::kName, 0, 0, false, 0, 0},
	{"reserved_qpn", Kind::kPolicy, 0, 0, false, 0, 0},
	{"quarantine_us", Kind::kUint, 0, 3600ull * 1000 * 1000, false,
	 offsetof(mlx5_qpn_devargs, quarantine_us), 8},
	U32(cache, 1, 65536, false),
	U32(log_range, 0, 24, false),
	U32(low_water, 0, 1u << 24, false),
	U32(max_qpns, 1, (1u << 24) - 1, false),
	{"numa", Kind::kUint, 0, 1023, true, offsetof(mlx5_qpn_devargs, numa_node), 4},
	{"cores", Kind::kCores, 0, 0, true, 0, 0},
	{"guid", Kind::kGuid, 1, UINT64_MAX, true, offsetof(mlx5_qpn_devargs, guid), 8},
	U32(ports, 1, 4, true),
	{"cap_reserved_qpn", Kind::kUint, 0, 1, true, offsetof(mlx5_qpn_devargs, cap_reserved_qpn), 4},
	U32(log_gran, 0, 24, true),
	U32(log_max_alloc, 0, 24, true),
	U32(log_max_num, 0, 24, true),
	U32(log_max_qp, 1, 24, true),
	U32(qpn_inc, 1, 255, true),
	U32(qos_shift, 0, 7, true),
	U32(rsvd_first, 0, 0xFFFFFF, true),
	U32(rsvd_count, 0, 1u << 24, true),
	U32(aip, 0, 1, true),
	U32(fault_nodevx, 0, 1, true),
	U32(fault_fw_rate, 0, 1000000, true),
	U32(fault_fw_after, 0, UINT32_MAX, true),
	U32(fault_fw_status, 0, 0xFF, true),
	U32(slow_cmd_us, 0, 10 * 1000 * 1000, true),
	U32(limit, 0, 1u << 24, true),
	U32(fw_first_fit, 0, 1, true),
};

const Key *find_key(const char *k)
{
	for (const Key &key : kKeys)
		if (strcmp(key.name, k) == 0)
			return &key;
	return nullptr;
}

bool parse_u64(const char *v, uint64_t *out)
{
	if (v[0] == '-' || v[0] == '+' || v[0] == ' ')
		return false;
	char *end = nullptr;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 0);
	if (errno != 0 || end == v || *end != '\0')
		return false;
	*out = x;
	return true;
}

/* "0x0002c90300a1b2c3", "0002:c903:00a1:b2c3" or "00:02:c9:03:00:a1:b2:c3". */
bool parse_guid(const char *v, uint64_t *out)
{
	std::string hex;
	const char *s = v;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	for (; *s; s++) {
		if (*s == ':')
			continue;
		if (!isxdigit(static_cast<unsigned char>(*s)))
			return false;
		hex.push_back(*s);
	}
	if (hex.empty() || hex.size() > 16)
		return false;
	*out = strtoull(hex.c_str(), nullptr, 16);
	return true;
}

/* "0-3", "0,2,4" is not possible inside kvargs (comma separates pairs): use "0-3" or "0:2:4". */
bool valid_cores(const char *v)
{
	if (*v == '\0' || strlen(v) >= sizeof(mlx5_qpn_devargs::cores))
		return false;
	for (const char *s = v; *s; s++)
		if (!isdigit(static_cast<unsigned char>(*s)) && *s != '-' && *s != ':')
			return false;
	return true;
}

int refuse(const char *key, const char *value, const char *why)
{
	DEV_LOG(ERR, "bad devarg %s=%s: %s", key, value != nullptr ? value : "", why);
	return -EINVAL;
}

void set_defaults(mlx5_qpn_devargs *da)
{
	memset(da, 0, sizeof(*da));
	da->kind = MLX5_QPN_BACKEND_SIM;
	da->reserved_qpn = MLX5_QPN_RSVD_TRY;
	da->quarantine_us = 2000000;
	da->cache = 64;
	da->log_range = UINT32_MAX; /* caps maximum */
	da->low_water = UINT32_MAX; /* 2 * cache */
	da->max_qpns = 65536;
	da->numa_node = -1;
	da->ports = 1;
	da->cap_reserved_qpn = 1;
	da->log_gran = 0;
	da->log_max_alloc = 10;
	da->log_max_num = 16;
	da->log_max_qp = 18;
	da->qpn_inc = 1;
	da->qos_shift = 0;
}

} /* namespace */

extern "C" int mlx5_qpn_devargs_parse(const char *devargs, struct mlx5_qpn_devargs *da)
{
	if (devargs == nullptr || da == nullptr)
		return -EINVAL;
	set_defaults(da);
	std::string s(devargs);
	std::string rest;
	/* The leading token is either a bare emulated-device name or the "ib=" pair. */
	size_t comma = s.find(',');
	std::string first = s.substr(0, comma);
	if (first.empty())
		return refuse("device", devargs, "no device name (expected simN or ib=NAME)");
	if (first.find('=') == std::string::npos) {
		if (first.compare(0, 3, "sim") != 0)
			return refuse("device", first.c_str(), "unknown device (expected simN or ib=NAME)");
		if (first.size() >= MLX5_QPN_DEV_NAMESIZE)
			return refuse("device", first.c_str(), "name too long");
		for (char ch : first)
			if (!isalnum(static_cast<unsigned char>(ch)) && ch != '_')
				return refuse("device", first.c_str(), "name may hold letters, digits and _");
		snprintf(da->name, sizeof(da->name), "%s", first.c_str());
		rest = comma == std::string::npos ? "" : s.substr(comma + 1);
	} else {
		rest = s;
	}
	if (!rest.empty() && (rest.front() == ',' || rest.back() == ',' ||
				rest.find(",,") != std::string::npos))
		return refuse("devargs", devargs, "empty key");

	bool have_name = da->name[0] != '\0';
	if (!rest.empty()) {
		struct rte_kvargs *kv = rte_kvargs_parse(rest.c_str(), nullptr);
		if (kv == nullptr)
			return refuse("devargs", rest.c_str(), "not a key=value list");
		int rc = 0;
		bool seen[RTE_DIM(kKeys)] = {};
		for (unsigned i = 0; i < kv->count && rc == 0; i++) {
			const char *k = kv->pairs[i].key;
			const char *v = kv->pairs[i].value; /* NULL for a bare key in DPDK 22.11 */
			const Key *key = find_key(k);
			if (key == nullptr) {
				rc = refuse(k, v, "unknown key");
				break;
			}
			size_t idx = static_cast<size_t>(key - kKeys);
			if (seen[idx]) {
				rc = refuse(k, v, "duplicate key");
				break;
			}
			seen[idx] = true;
			if (v == nullptr || *v == '\0') {
				rc = refuse(k, v, "empty value");
				break;
			}
			uint64_t x = 0;
			switch (key->kind) {
			case Kind::kName:
				if (have_name) {
					rc = refuse(k, v, "device named twice");
				} else if (strlen(v) >= MLX5_QPN_DEV_NAMESIZE) {
					rc = refuse(k, v, "name too long");
				} else {
					da->kind = MLX5_QPN_BACKEND_HW;
					snprintf(da->name, sizeof(da->name), "%s", v);
					have_name = true;
				}
				break;
			case Kind::kPolicy:
				if (strcmp(v, "try") == 0)
					da->reserved_qpn = MLX5_QPN_RSVD_TRY;
				else if (strcmp(v, "yes") == 0)
					da->reserved_qpn = MLX5_QPN_RSVD_YES;
				else if (strcmp(v, "no") == 0)
					da->reserved_qpn = MLX5_QPN_RSVD_NO;
				else
					rc = refuse(k, v, "expected try, yes or no");
				break;
			case Kind::kCores:
				if (!valid_cores(v))
					rc = refuse(k, v, "expected a core list such as 0-3 or 0:2:4");
				else
					snprintf(da->cores, sizeof(da->cores), "%s", v);
				break;
			case Kind::kGuid:
				if (!parse_guid(v, &x) || x == 0)
					rc = refuse(k, v, "expected a non-zero 64-bit hex GUID");
				else
					memcpy(reinterpret_cast<char *>(da) + key->off, &x, 8);
				break;
			case Kind::kUint: {
				if (!parse_u64(v, &x)) {
					rc = refuse(k, v, "not an unsigned number");
					break;
				}
				if (x < key->min || x > key->max) {
					char why[96];
					snprintf(why, sizeof(why), "out of range [%" PRIu64 ", %" PRIu64 "]",
						 key->min, key->max);
					rc = refuse(k, v, why);
					break;
				}
				if (key->width == 8) {
					memcpy(reinterpret_cast<char *>(da) + key->off, &x, 8);
				} else {
					uint32_t y = static_cast<uint32_t>(x);
					memcpy(reinterpret_cast<char *>(da) + key->off, &y, 4);
				}
				break;
			}
			}
		}
		/* Keys that only the emulated device understands are refused for hardware. */
		for (unsigned i = 0; i < kv->count && rc == 0; i++) {
			const Key *key = find_key(kv->pairs[i].key);
			if (da->kind == MLX5_QPN_BACKEND_HW && key->sim_only)
				rc = refuse(kv->pairs[i].key, kv->pairs[i].value,
					    "only the emulated device (simN) takes this key");
		}
		rte_kvargs_free(kv);
		if (rc != 0)
			return rc;
	}
	if (!have_name)
		return refuse("device", devargs, "no device name (expected simN or ib=NAME)");
	if (da->log_gran > da->log_max_alloc)
		return refuse("log_gran", std::to_string(da->log_gran).c_str(),
			      "larger than log_max_alloc");
	if (da->rsvd_count != 0 && da->rsvd_first + static_cast<uint64_t>(da->rsvd_count) > (1u << 24))
		return refuse("rsvd_count", std::to_string(da->rsvd_count).c_str(),
			      "range passes QPN 0xFFFFFF");
	if (da->low_water == UINT32_MAX)
		da->low_water = 2 * da->cache;
	return 0;
}
