/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Devargs: "sim0,key=value,..." or "ib=mlx5_0,key=value,...". The grammar is checked on the text
 * as written (check_syntax()), then the list is split in place (DevargPairs: rte_kvargs_parse()
 * would allocate, with a key list only says no, and its tokenizer rewrites some malformed pairs
 * before we could see them); the allow-list, names, numbers and ranges are checked here so that
 * every refusal names the offending text, as the user wrote it, in one log line.
 *
 * The generic layer knows only the keys every backend takes. The device name picks a backend
 * from the registry (mlx5_qpn_backend.h), whose own key table, defaults and cross-key checks
 * fill and judge mlx5_qpn_devargs.be_args; a key that only another backend takes is refused
 * naming that backend.
 *
 * Nothing here allocates (the library promises -ENOMEM, never an abort, and a parse has no
 * reason to fail for memory): the text is at most MLX5_QPN_DEVARGS_MAX characters, and every
 * buffer is sized from that bound, filled with snprintf() or Text (which says when it cut).
 */
#include <cerrno>
#include <cctype>
#include <cinttypes>
#include <cstdlib>
#include <cstring>

#include <rte_common.h>
#include <rte_log.h>

#include "mlx5_qpn_backend.h"
#include "mlx5_qpn_dev_log.h"
#include "mlx5_qpn_devargs.h"
#include "mlx5_qpn_text.h"

namespace {

using mlx5_qpn_dev_impl::DevargPairs;
using mlx5_qpn_dev_impl::has_char;
using mlx5_qpn_dev_impl::has_space_or_control;
using mlx5_qpn_dev_impl::kShownSize;
using mlx5_qpn_dev_impl::shown;
using mlx5_qpn_dev_impl::Span;
using mlx5_qpn_dev_impl::span;
using mlx5_qpn_dev_impl::Text;

#define U32(f, lo, hi)                                                                             \
	{                                                                                          \
#f, MLX5_QPN_DEVARG_UINT, lo, hi, offsetof(mlx5_qpn_devargs, f), 4                 \
	}

/* The generic allow-list (with reserved_qpn and each backend's name key, handled apart). */
const mlx5_qpn_devarg_key kKeys[] = {
	{"quarantine_us", MLX5_QPN_DEVARG_UINT, 0, 3600ull * 1000 * 1000,
	 offsetof(mlx5_qpn_devargs, quarantine_us), 8},
	U32(cache, 1, 65536),
	U32(log_range, 0, 24),
	U32(low_water, 0, 1u << 24),
	U32(max_qpns, 1, (1u << 24) - 1),
};
constexpr const char kPolicyKey[] = "reserved_qpn";

const mlx5_qpn_devarg_key *
key_in(const mlx5_qpn_devarg_key *keys, unsigned n, const char *k)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(keys[i].name, k) == 0)
			return &keys[i];
	return nullptr;
}

/* Who takes key k. */
struct Owner {
	enum { kNone, kGeneric, kPolicy, kName, kBackend } what = kNone;
	const mlx5_qpn_backend_desc *be = nullptr; /* kName, kBackend */
	const mlx5_qpn_devarg_key *key = nullptr;  /* kGeneric, kBackend */
};

/* The backend's own key wins over another backend's of the same name (prefer may be NULL). */
Owner
owner_of(const char *k, const mlx5_qpn_backend_desc *prefer)
{
	Owner o;
	if ((o.key = key_in(kKeys, RTE_DIM(kKeys), k)) != nullptr) {
		o.what = Owner::kGeneric;
		return o;
	}
	if (strcmp(k, kPolicyKey) == 0) {
		o.what = Owner::kPolicy;
		return o;
	}
	if (prefer != nullptr && (o.key = key_in(prefer->keys, prefer->nb_keys, k)) != nullptr) {
		o.what = Owner::kBackend;
		o.be = prefer;
		return o;
	}
	const mlx5_qpn_backend_desc *be;
	for (unsigned i = 0; (be = mlx5_qpn_backend_at(i)) != nullptr; i++) {
		if (be->name_key != nullptr && strcmp(be->name_key, k) == 0) {
			o.what = Owner::kName;
			o.be = be;
			return o;
		}
		if ((o.key = key_in(be->keys, be->nb_keys, k)) != nullptr) {
			o.what = Owner::kBackend;
			o.be = be;
			return o;
		}
	}
	return o;
}

/* "<what> (expected simN or ib=NAME)": the ways the registered backends name a device. */
const char *
no_device(const char *what, Text &&s)
{
	s.add(what).add(" (");
	size_t start = s.len;
	const mlx5_qpn_backend_desc *be;
	for (int pass = 0; pass < 2; pass++)
		for (unsigned i = 0; (be = mlx5_qpn_backend_at(i)) != nullptr; i++) {
			const char *way = pass == 0 ? be->name_prefix : be->name_key;
			if (way == nullptr)
				continue;
			s.add(s.len == start ? "expected " : " or ");
			s.add(way).add(pass == 0 ? "N" : "=NAME");
		}
	if (s.len == start)
		s.add("no backend is registered");
	return s.add(")").p;
}

/*
 * Numbers: decimal ("4096"), or hexadecimal with 0x/0X ("0x1000"). Nothing else: no sign, no
 * whitespace, no suffix, and no leading zero before another digit, because strtoull(..., 0)
 * would read "010" as octal 8 while a reader expects ten (refused rather than guessed).
 * @return 0; -ERANGE for a well-formed number that does not fit 64 bits; -EINVAL otherwise.
 */
int
parse_u64(const char *v, uint64_t *out)
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
		if (base == 10 ? !isdigit(static_cast<unsigned char>(*s)) :
				 !isxdigit(static_cast<unsigned char>(*s)))
			return -EINVAL;
	errno = 0;
	unsigned long long x = strtoull(digits, nullptr, base);
	if (errno == ERANGE)
		return -ERANGE;
	*out = x;
	return 0;
}

/* Hex digits only, 1..maxlen of them. */
bool
all_hex(const char *s, size_t len, size_t maxlen)
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
bool
parse_guid(const char *v, uint64_t *out)
{
	char buf[17];
	Text hex(buf, sizeof(buf));
	const char *s = v;
	if (strchr(s, ':') == nullptr) {
		if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
			s += 2;
		if (!all_hex(s, strlen(s), 16))
			return false;
		hex.add(s);
	} else {
		size_t group = strlen(s) == 19 ? 4 : 2;
		size_t groups = group == 4 ? 4 : 8;
		if (strlen(s) != groups * group + groups - 1)
			return false;
		for (size_t g = 0; g < groups; g++) {
			const char *p = s + g * (group + 1);
			if (!all_hex(p, group, group) || (g + 1 < groups && p[group] != ':'))
				return false;
			hex.add(p, group);
		}
	}
	*out = strtoull(hex.p, nullptr, 16);
	return true;
}

/* A core list, "0-3" or "0:2:4" or "0-3:8-11" (a comma would end the pair): items N or N-M with
 * N <= M < 65536, separated by ':'. */
bool
valid_cores(const char *v, size_t size)
{
	if (*v == '\0' || strlen(v) >= size)
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

/* Device names: a bare name (a backend's prefix, "sim0") is letters, digits and '_'; a name given
 * by key (an ibv device name) is letters, digits, '_', '-' and '.'. Both shorter than
 * MLX5_QPN_DEV_NAMESIZE. */
const char *
bad_name(Span v, bool bare)
{
	if (v.n == 0)
		return "empty device name";
	if (v.n >= MLX5_QPN_DEV_NAMESIZE)
		return "name too long (at most 31 characters)";
	for (size_t i = 0; i < v.n; i++) {
		unsigned char ch = static_cast<unsigned char>(v.p[i]);
		if (!isalnum(ch) && ch != '_' && (bare || (ch != '-' && ch != '.')))
			return bare ? "name may hold letters, digits and _" :
				      "name may hold letters, digits, _, - and .";
	}
	return nullptr;
}

/* mlx5_qpn_devargs_check() in progress on this thread: the refusal goes to its buffer instead
 * of the log (an application that checks first prints the reason in its own words). */
thread_local char *t_why;
thread_local size_t t_why_len;

/* One refusal: one log line naming the text (already shown). */
void
emit(const char *text, const char *why)
{
	if (t_why != nullptr)
		snprintf(t_why, t_why_len, "bad devarg %s: %s", text, why);
	else
		DEV_LOG(ERR, "bad devarg %s: %s", text, why);
}

/* One refusal: one log line naming the text as written. */
int
refuse_text(Span text, const char *why)
{
	char buf[kShownSize];
	emit(shown(text, Text(buf, sizeof(buf))), why);
	return -EINVAL;
}

int
refuse(const char *key, const char *value, const char *why)
{
	char buf[2 * (MLX5_QPN_DEVARGS_MAX + 1)];
	Text kv(buf, sizeof(buf));
	kv.add(key).add("=").add(value != nullptr ? value : "");
	return refuse_text({kv.p, kv.len}, why);
}

/* The key of a pair that passed the checks of check_syntax() (holds one '='). */
Span
key_of(Span pair)
{
	return {pair.p, size_t(static_cast<const char *>(memchr(pair.p, '=', pair.n)) - pair.p)};
}

/* Was key given by a pair of list[0, end) (pairs already checked)? */
bool
key_before(Span list, size_t end, Span key)
{
	for (size_t at = 0; at < end;) {
		const char *comma = static_cast<const char *>(memchr(list.p + at, ',', end - at));
		size_t stop = comma != nullptr ? size_t(comma - list.p) : end;
		Span k = key_of({list.p + at, stop - at});
		if (k.n == key.n && memcmp(k.p, key.p, k.n) == 0)
			return true;
		at = stop + 1;
	}
	return false;
}

/*
 * The grammar, checked on the text as the user wrote it before it is split (a tokenizer such as
 * rte_kvargs' skips empty pairs and leading '=', so "k==v" would reach us as "k" and "=v" and
 * ",=5" as a key "5"): pairs separated by single commas; each pair is KEY=VALUE with exactly
 * one '=', a non-empty key from the allow-list and a non-empty value; no whitespace or control
 * character anywhere; no DPDK "[a,b]" list; no key twice. Refusals name the pair (or, for an empty
 * pair, the whole string) as written.
 */
int
check_syntax(Span all, Span list)
{
	if (list.n == 0)
		return 0;
	if (list.p[0] == ',')
		return refuse_text(all, "empty pair (a leading or doubled ',')");
	if (list.p[list.n - 1] == ',')
		return refuse_text(all, "empty pair (a trailing ',')");
	size_t at = 0;
	while (at <= list.n) {
		const char *comma =
			static_cast<const char *>(memchr(list.p + at, ',', list.n - at));
		Span pair = {list.p + at,
			     (comma != nullptr ? size_t(comma - list.p) : list.n) - at};
		if (pair.n == 0)
			return refuse_text(all, "empty pair (a doubled ',')");
		if (has_space_or_control(pair))
			return refuse_text(pair, "whitespace or control character (devargs "
						 "take none)");
		if (has_char(pair, "[]")) {
			/* DPDK's "key=[a,b]" list: name the whole list, not its pieces. */
			const char *close =
				static_cast<const char *>(memchr(list.p + at, ']', list.n - at));
			return refuse_text(
				{list.p + at,
				 (close != nullptr ? size_t(close + 1 - list.p) : list.n) - at},
				"a [list] value (none of these keys takes one; cores: use "
				"0-3 or 0:2:4)");
		}
		const char *eq = static_cast<const char *>(memchr(pair.p, '=', pair.n));
		if (eq == nullptr)
			return refuse_text(pair, "bare key (expected key=value)");
		if (eq == pair.p)
			return refuse_text(pair, "empty key");
		if (memchr(eq + 1, '=', size_t(pair.p + pair.n - eq - 1)) != nullptr)
			return refuse_text(pair, "more than one '=' (expected key=value)");
		if (eq + 1 == pair.p + pair.n)
			return refuse_text(pair, "empty value");
		Span key = {pair.p, size_t(eq - pair.p)};
		char kbuf[MLX5_QPN_DEVARGS_MAX + 1];
		snprintf(kbuf, sizeof(kbuf), "%.*s", int(key.n), key.p);
		if (owner_of(kbuf, nullptr).what == Owner::kNone)
			return refuse_text(pair, "unknown key");
		if (key_before(list, at, key))
			return refuse_text(pair, "duplicate key");
		if (comma == nullptr)
			break;
		at = size_t(comma - list.p) + 1;
	}
	return 0;
}

void
set_defaults(mlx5_qpn_devargs *da)
{
	memset(da, 0, sizeof(*da));
	da->reserved_qpn = MLX5_QPN_RSVD_TRY;
	da->quarantine_us = 2000000;
	da->cache = 64;
	da->log_range = UINT32_MAX; /* caps maximum */
	da->low_water = UINT32_MAX; /* 2 * cache */
	da->max_qpns = 65536;
}

/* The backend whose name prefix a bare leading token carries. */
const mlx5_qpn_backend_desc *
backend_of_prefix(Span first)
{
	const mlx5_qpn_backend_desc *be;
	for (unsigned i = 0; (be = mlx5_qpn_backend_at(i)) != nullptr; i++)
		if (be->name_prefix != nullptr && first.n >= strlen(be->name_prefix) &&
		    memcmp(first.p, be->name_prefix, strlen(be->name_prefix)) == 0)
			return be;
	return nullptr;
}

void
choose_backend(mlx5_qpn_devargs *da, const mlx5_qpn_backend_desc *be)
{
	da->backend = be;
	if (be->args_default != nullptr)
		be->args_default(da->be_args);
}

/* Every pair of the checked list, in order: generic keys into *da, the chosen backend's into
 * da->be_args; another backend's key is read into scratch (a bad value is refused as such)
 * and refused afterwards, naming who takes it. */
int
parse_pairs(Span rest, mlx5_qpn_devargs *da, bool have_name)
{
	/* Syntax checked: split into exactly the pairs check_syntax() saw. */
	DevargPairs kv;
	if (!kv.init(rest.p, rest.n))
		return refuse_text(rest, "not a key=value list");
	int rc = 0;
	const char *k, *v;
	/* A device named by a key (ib=NAME, possibly after other keys): its backend's defaults
	 * and keys apply to every pair. */
	for (size_t at = 0; da->backend == nullptr && (k = kv.next(&at, &v)) != nullptr;) {
		Owner o = owner_of(k, nullptr);
		if (o.what == Owner::kName)
			choose_backend(da, o.be);
	}
	for (size_t at = 0; rc == 0 && (k = kv.next(&at, &v)) != nullptr;) {
		if (*v == '\0') {
			rc = refuse_text(span(k), "bare key (expected key=value)");
			break;
		}
		Owner o = owner_of(k, da->backend);
		switch (o.what) {
		case Owner::kNone:
			rc = refuse(k, v, "unknown key");
			break;
		case Owner::kName:
			if (have_name || o.be != da->backend) {
				rc = refuse(k, v, "device named twice");
			} else if (const char *why = bad_name(span(v), false)) {
				rc = refuse(k, v, why);
			} else {
				snprintf(da->name, sizeof(da->name), "%s", v);
				have_name = true;
			}
			break;
		case Owner::kPolicy:
			if (strcmp(v, "try") == 0)
				da->reserved_qpn = MLX5_QPN_RSVD_TRY;
			else if (strcmp(v, "yes") == 0)
				da->reserved_qpn = MLX5_QPN_RSVD_YES;
			else if (strcmp(v, "no") == 0)
				da->reserved_qpn = MLX5_QPN_RSVD_NO;
			else
				rc = refuse(k, v, "expected try, yes or no");
			break;
		case Owner::kGeneric:
			rc = mlx5_qpn_devargs_take(o.key, v, da);
			break;
		case Owner::kBackend:
			if (o.be == da->backend) {
				rc = mlx5_qpn_devargs_take(o.key, v, da->be_args);
			} else {
				uint64_t scratch[MLX5_QPN_BE_ARGS_WORDS] = {};
				rc = mlx5_qpn_devargs_take(o.key, v, scratch);
			}
			break;
		}
	}
	/* Keys that only another backend takes (the emulated device's with ib=). */
	for (size_t at = 0;
	     rc == 0 && da->backend != nullptr && (k = kv.next(&at, &v)) != nullptr;) {
		Owner o = owner_of(k, da->backend);
		if (o.what == Owner::kBackend && o.be != da->backend) {
			char why[128];
			snprintf(why, sizeof(why), "only %s takes this key", o.be->owner);
			rc = refuse(k, v, why);
		}
	}
	if (rc == 0 && !have_name)
		rc = 1;
	return rc;
}

} /* namespace */

extern "C" int
mlx5_qpn_devargs_refuse(const char *key, const char *value, const char *why)
{
	return refuse(key, value, why);
}

extern "C" int
mlx5_qpn_devargs_take(const struct mlx5_qpn_devarg_key *key, const char *v, void *args)
{
	char *field = static_cast<char *>(args) + key->off;
	uint64_t x = 0;
	switch (key->type) {
	case MLX5_QPN_DEVARG_CORES:
		if (!valid_cores(v, key->width))
			return refuse(
				key->name, v,
				"expected a core list such as 0-3 or 0:2:4 (< 64 characters)");
		snprintf(field, key->width, "%s", v);
		return 0;
	case MLX5_QPN_DEVARG_GUID:
		if (!parse_guid(v, &x) || x == 0)
			return refuse(key->name, v, "expected a non-zero 64-bit hex GUID");
		memcpy(field, &x, 8);
		return 0;
	case MLX5_QPN_DEVARG_UINT:
		break;
	}
	int prc = parse_u64(v, &x);
	if (prc == -EINVAL)
		return refuse(key->name, v,
			      "not a number (decimal, or hex with 0x; no sign, no leading zero)");
	if (prc != 0 || x < key->min || x > key->max) {
		char why[128];
		snprintf(why, sizeof(why), "out of range [%" PRIu64 ", %" PRIu64 "]", key->min,
			 key->max);
		return refuse(key->name, v, why);
	}
	if (key->width == 8) {
		memcpy(field, &x, 8);
	} else {
		uint32_t y = static_cast<uint32_t>(x);
		memcpy(field, &y, 4);
	}
	return 0;
}

extern "C" int
mlx5_qpn_devargs_parse(const char *devargs, struct mlx5_qpn_devargs *da)
{
	if (devargs == nullptr || da == nullptr)
		return -EINVAL;
	set_defaults(da);
	char why[256];
	Span s = {devargs, strnlen(devargs, MLX5_QPN_DEVARGS_MAX + 1)};
	if (s.n > MLX5_QPN_DEVARGS_MAX) {
		char head[48];
		snprintf(head, sizeof(head), "%.32s...", devargs);
		snprintf(why, sizeof(why), "longer than %d characters (MLX5_QPN_DEVARGS_MAX)",
			 MLX5_QPN_DEVARGS_MAX);
		emit(head, why);
		return -EINVAL; /* as every bad devargs (the contract of mlx5_qpn_devargs_check()) */
	}
	if (s.n == 0)
		return refuse_text(s, no_device("no device", Text(why, sizeof(why))));
	/* The leading token is either a bare device name or a pair (ib=NAME or another key: the
	 * naming key may come later). */
	const char *comma = static_cast<const char *>(memchr(s.p, ',', s.n));
	Span first = {s.p, comma != nullptr ? size_t(comma - s.p) : s.n};
	Span rest = s;
	bool have_name = false;
	if (memchr(first.p, '=', first.n) == nullptr && first.n != 0) {
		if (has_space_or_control(first))
			return refuse_text(first,
					   "whitespace or control character (devargs take none)");
		const mlx5_qpn_backend_desc *be = backend_of_prefix(first);
		if (be == nullptr)
			return refuse_text(first,
					   no_device("unknown device", Text(why, sizeof(why))));
		if (const char *bad = bad_name(first, true))
			return refuse_text(first, bad);
		snprintf(da->name, sizeof(da->name), "%.*s", int(first.n), first.p);
		have_name = true;
		choose_backend(da, be);
		rest = comma == nullptr ? Span{"", 0} :
					  Span{comma + 1, size_t(s.p + s.n - comma - 1)};
		if (comma != nullptr && rest.n == 0)
			return refuse_text(s, "empty pair (a trailing ',')");
	}
	int rc = check_syntax(s, rest);
	if (rc != 0)
		return rc;
	rc = rest.n == 0 ? (have_name ? 0 : 1) : parse_pairs(rest, da, have_name);
	if (rc == 1)
		return refuse_text(s, no_device("no device", Text(why, sizeof(why))));
	if (rc != 0)
		return rc;
	if (da->backend->args_check != nullptr && (rc = da->backend->args_check(da->be_args)) != 0)
		return rc;
	if (da->low_water == UINT32_MAX)
		da->low_water = 2 * da->cache;
	return 0;
}

extern "C" int
mlx5_qpn_devargs_check(const char *devargs, char *why, size_t len)
{
	char scratch[8];
	struct mlx5_qpn_devargs da;
	if (why != nullptr && len > 0)
		why[0] = '\0';
	t_why = why != nullptr && len > 0 ? why : scratch;
	t_why_len = why != nullptr && len > 0 ? len : sizeof(scratch);
	int rc = mlx5_qpn_devargs_parse(devargs, &da);
	t_why = nullptr;
	if (rc != 0 && devargs == nullptr && why != nullptr && len > 0)
		snprintf(why, len, "no devargs (NULL)");
	return rc;
}
