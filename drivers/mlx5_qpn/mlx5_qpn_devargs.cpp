/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Devargs: "sim0,key=value,..." or "ib=mlx5_0,key=value,...". The grammar is checked on the text
 * as written (check_syntax()), then rte_kvargs splits the list; the allow-list, names, numbers and
 * ranges are checked here so that every refusal names the offending text, as the user wrote it,
 * in one log line (rte_kvargs_parse() with a key list only says no, and its tokenizer rewrites
 * some malformed pairs before we could see them).
 */
#include <cerrno>
#include <cctype>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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

/*
 * Numbers: decimal ("4096"), or hexadecimal with 0x/0X ("0x1000"). Nothing else: no sign, no
 * whitespace, no suffix, and no leading zero before another digit, because strtoull(..., 0)
 * would read "010" as octal 8 while a reader expects ten (refused rather than guessed).
 * @return 0; -ERANGE for a well-formed number that does not fit 64 bits; -EINVAL otherwise.
 */
int parse_u64(const char *v, uint64_t *out)
{
	int base = 10;
	const char *digits = v;
	if (v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
		base = 16;
		digits = v + 2;
	} else if (v[0] == '0' && v[1] != '\0') {
		return -EINVAL;
	}
	if (*digits == '\0')
		return -EINVAL;
	for (const char *s = digits; *s; s++)
		if (base == 10 ? !isdigit(static_cast<unsigned char>(*s))
			       : !isxdigit(static_cast<unsigned char>(*s)))
			return -EINVAL;
	errno = 0;
	unsigned long long x = strtoull(digits, nullptr, base);
	if (errno == ERANGE)
		return -ERANGE;
	*out = x;
	return 0;
}

/* Hex digits only, 1..maxlen of them. */
bool all_hex(const char *s, size_t len, size_t maxlen)
{
	if (len == 0 || len > maxlen)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isxdigit(static_cast<unsigned char>(s[i])))
			return false;
	return true;
}

/* "0x0002c90300a1b2c3" or "0002c90300a1b2c3" (1..16 hex digits), "0002:c903:00a1:b2c3" (four
 * groups of four) or "00:02:c9:03:00:a1:b2:c3" (eight groups of two). */
bool parse_guid(const char *v, uint64_t *out)
{
	std::string hex;
	const char *s = v;
	if (strchr(s, ':') == nullptr) {
		if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
			s += 2;
		if (!all_hex(s, strlen(s), 16))
			return false;
		hex = s;
	} else {
		size_t group = strlen(s) == 19 ? 4 : 2;
		size_t groups = group == 4 ? 4 : 8;
		if (strlen(s) != groups * group + groups - 1)
			return false;
		for (size_t g = 0; g < groups; g++) {
			const char *p = s + g * (group + 1);
			if (!all_hex(p, group, group) || (g + 1 < groups && p[group] != ':'))
				return false;
			hex.append(p, group);
		}
	}
	*out = strtoull(hex.c_str(), nullptr, 16);
	return true;
}

/* A core list, "0-3" or "0:2:4" or "0-3:8-11" (a comma would end the pair): items N or N-M with
 * N <= M < 65536, separated by ':'. */
bool valid_cores(const char *v)
{
	if (*v == '\0' || strlen(v) >= sizeof(mlx5_qpn_devargs::cores))
		return false;
	const char *s = v;
	for (;;) {
		unsigned long lo, hi;
		if (!isdigit(static_cast<unsigned char>(*s)))
			return false;
		char *end;
		lo = strtoul(s, &end, 10);
		hi = lo;
		if (*end == '-') {
			if (!isdigit(static_cast<unsigned char>(end[1])))
				return false;
			hi = strtoul(end + 1, &end, 10);
		}
		if (lo > hi || hi > 65535)
			return false;
		if (*end == '\0')
			return true;
		if (*end != ':')
			return false;
		s = end + 1;
	}
}

/* Device names: an emulated device is "sim" plus letters, digits and '_'; an ibv device name is
 * letters, digits, '_', '-' and '.'. Both shorter than MLX5_QPN_DEV_NAMESIZE. */
const char *bad_name(const char *v, bool sim)
{
	if (*v == '\0')
		return "empty device name";
	if (strlen(v) >= MLX5_QPN_DEV_NAMESIZE)
		return "name too long (at most 31 characters)";
	for (const char *s = v; *s; s++) {
		unsigned char ch = static_cast<unsigned char>(*s);
		if (!isalnum(ch) && ch != '_' && (sim || (ch != '-' && ch != '.')))
			return sim ? "name may hold letters, digits and _"
				   : "name may hold letters, digits, _, - and .";
	}
	return nullptr;
}

/* The text as the user wrote it, quoted and escaped if it holds anything but visible
 * characters, so that a space, a tab or an empty string can be seen in the log line. */
std::string shown(const std::string &t)
{
	bool plain = !t.empty();
	for (unsigned char ch : t)
		if (!isgraph(ch) || ch == '"')
			plain = false;
	if (plain)
		return t;
	std::string q = "\"";
	for (unsigned char ch : t) {
		char buf[8];
		if (ch == '"' || ch == '\\')
			snprintf(buf, sizeof(buf), "\\%c", ch);
		else if (isprint(ch))
			snprintf(buf, sizeof(buf), "%c", ch);
		else if (ch == '\t')
			snprintf(buf, sizeof(buf), "\\t");
		else
			snprintf(buf, sizeof(buf), "\\x%02x", ch);
		q += buf;
	}
	return q + "\"";
}

/* One refusal: one log line naming the text as written. */
int refuse_text(const std::string &text, const char *why)
{
	DEV_LOG(ERR, "bad devarg %s: %s", shown(text).c_str(), why);
	return -EINVAL;
}

int refuse(const char *key, const char *value, const char *why)
{
	return refuse_text(std::string(key) + "=" + (value != nullptr ? value : ""), why);
}

/*
 * The grammar, checked on the text as the user wrote it before rte_kvargs splits it (the
 * kvargs tokenizer skips empty pairs and leading '=', so "k==v" would reach us as "k" and "=v"
 * and ",=5" as a key "5"): pairs separated by single commas; each pair is KEY=VALUE with exactly
 * one '=', a non-empty key from the allow-list and a non-empty value; no whitespace or control
 * character anywhere; no DPDK "[a,b]" list; no key twice. Refusals name the pair (or, for an empty
 * pair, the whole string) as written.
 */
int check_syntax(const std::string &all, const std::string &list)
{
	if (list.empty())
		return 0;
	if (list.front() == ',')
		return refuse_text(all, "empty pair (a leading or doubled ',')");
	if (list.back() == ',')
		return refuse_text(all, "empty pair (a trailing ',')");
	std::vector<std::string> keys;
	size_t at = 0;
	while (at <= list.size()) {
		size_t comma = list.find(',', at);
		std::string pair = list.substr(at, comma == std::string::npos ? std::string::npos
									      : comma - at);
		if (pair.empty())
			return refuse_text(all, "empty pair (a doubled ',')");
		for (unsigned char ch : pair)
			if (isspace(ch) || !isprint(ch))
				return refuse_text(pair, "whitespace or control character (devargs "
							 "take none)");
		if (pair.find_first_of("[]") != std::string::npos) {
			/* DPDK's "key=[a,b]" list: name the whole list, not its pieces. */
			size_t close = list.find(']', at);
			return refuse_text(list.substr(at, close == std::string::npos
							       ? std::string::npos : close + 1 - at),
					   "a [list] value (none of these keys takes one; cores: use "
					   "0-3 or 0:2:4)");
		}
		size_t eq = pair.find('=');
		if (eq == std::string::npos)
			return refuse_text(pair, "bare key (expected key=value)");
		if (eq == 0)
			return refuse_text(pair, "empty key");
		if (pair.find('=', eq + 1) != std::string::npos)
			return refuse_text(pair, "more than one '=' (expected key=value)");
		if (eq + 1 == pair.size())
			return refuse_text(pair, "empty value");
		std::string key = pair.substr(0, eq);
		if (find_key(key.c_str()) == nullptr)
			return refuse_text(pair, "unknown key");
		for (const auto &k : keys)
			if (k == key)
				return refuse_text(pair, "duplicate key");
		keys.push_back(key);
		if (comma == std::string::npos)
			break;
		at = comma + 1;
	}
	return 0;
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
	if (s.empty())
		return refuse_text(s, "no device (expected simN or ib=NAME)");
	/* The leading token is either a bare emulated-device name or a pair (ib=NAME or another
	 * key: ib= may come later). */
	size_t comma = s.find(',');
	std::string first = s.substr(0, comma);
	std::string rest = s;
	bool have_name = false;
	if (first.find('=') == std::string::npos && !first.empty()) {
		for (unsigned char ch : first)
			if (isspace(ch) || !isprint(ch))
				return refuse_text(first, "whitespace or control character (devargs take none)");
		if (first.compare(0, 3, "sim") != 0)
			return refuse_text(first, "unknown device (expected simN or ib=NAME)");
		if (const char *why = bad_name(first.c_str(), true))
			return refuse_text(first, why);
		snprintf(da->name, sizeof(da->name), "%s", first.c_str());
		have_name = true;
		rest = comma == std::string::npos ? "" : s.substr(comma + 1);
		if (comma != std::string::npos && rest.empty())
			return refuse_text(s, "empty pair (a trailing ',')");
	}
	int rc = check_syntax(s, rest);
	if (rc != 0)
		return rc;

	if (!rest.empty()) {
		/* Syntax checked: kvargs splits it into exactly the pairs seen above. */
		struct rte_kvargs *kv = rte_kvargs_parse(rest.c_str(), nullptr);
		if (kv == nullptr)
			return refuse_text(rest, "not a key=value list");
		for (unsigned i = 0; i < kv->count && rc == 0; i++) {
			const char *k = kv->pairs[i].key;
			const char *v = kv->pairs[i].value; /* NULL for a bare key in DPDK 22.11 */
			if (v == nullptr || *v == '\0') {
				rc = refuse_text(k, "bare key (expected key=value)");
				break;
			}
			const Key *key = find_key(k);
			if (key == nullptr) {
				rc = refuse(k, v, "unknown key");
				break;
			}
			uint64_t x = 0;
			switch (key->kind) {
			case Kind::kName:
				if (have_name) {
					rc = refuse(k, v, "device named twice");
				} else if (const char *why = bad_name(v, false)) {
					rc = refuse(k, v, why);
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
					rc = refuse(k, v, "expected a core list such as 0-3 or 0:2:4 (< 64 characters)");
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
				int prc = parse_u64(v, &x);
				char why[128];
				if (prc == -EINVAL) {
					rc = refuse(k, v, "not a number (decimal, or hex with 0x; no sign, "
							  "no leading zero)");
					break;
				}
				if (prc != 0 || x < key->min || x > key->max) {
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
		return refuse_text(s, "no device (expected simN or ib=NAME)");
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
