/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_TEXT_H
#define MLX5_QPN_TEXT_H

/*
 * Internal: text in bounded buffers, for the devargs parser (mlx5_qpn_devargs.cpp) and the
 * multi-process devargs agreement (mlx5_qpn_mp.cpp). The library is built with -fno-exceptions,
 * where a std::string that cannot allocate is an abort; devargs have a maximum length
 * (MLX5_QPN_DEVARGS_MAX), so every text made of them fits a buffer sized from it, and Text says
 * when something did not fit (the caller refuses rather than use a cut text).
 */

#include <cctype>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "mlx5_qpn_devargs.h"

namespace mlx5_qpn_dev_impl {

/* Appends what fits into a caller's buffer, always NUL-terminated; `cut` says something did not
 * fit (the caller refuses rather than use a truncated text). */
struct Text {
	char *p;
	size_t size; /* > 0 */
	size_t len = 0;
	bool cut = false;

	Text(char *buf, size_t n) : p(buf), size(n) { p[0] = '\0'; }
	Text &add(const char *s, size_t n)
	{
		size_t room = size - 1 - len;
		if (n > room) {
			n = room;
			cut = true;
		}
		memcpy(p + len, s, n);
		len += n;
		p[len] = '\0';
		return *this;
	}
	Text &add(const char *s) { return add(s, strlen(s)); }
};

/* A piece of the devargs text as written (not NUL-terminated). */
struct Span {
	const char *p;
	size_t n;
};

inline Span
span(const char *s)
{
	return {s, strlen(s)};
}

inline bool
has_char(Span t, const char *set)
{
	for (size_t i = 0; i < t.n; i++)
		if (strchr(set, t.p[i]) != nullptr)
			return true;
	return false;
}

inline bool
has_space_or_control(Span t)
{
	for (size_t i = 0; i < t.n; i++) {
		unsigned char ch = static_cast<unsigned char>(t.p[i]);
		if (isspace(ch) || !isprint(ch))
			return true;
	}
	return false;
}

/* The text as the user wrote it, quoted and escaped if it holds anything but visible
 * characters, so that a space, a tab or an empty string can be seen in the log line. */
inline const char *
shown(Span t, Text &&q)
{
	bool plain = t.n != 0;
	for (size_t i = 0; i < t.n; i++)
		if (!isgraph(static_cast<unsigned char>(t.p[i])) || t.p[i] == '"')
			plain = false;
	if (plain)
		return q.add(t.p, t.n).p;
	q.add("\"");
	for (size_t i = 0; i < t.n; i++) {
		unsigned char ch = static_cast<unsigned char>(t.p[i]);
		char buf[8];
		if (ch == '"' || ch == '\\')
			snprintf(buf, sizeof(buf), "\\%c", ch);
		else if (isprint(ch))
			snprintf(buf, sizeof(buf), "%c", ch);
		else if (ch == '\t')
			snprintf(buf, sizeof(buf), "\\t");
		else
			snprintf(buf, sizeof(buf), "\\x%02x", ch);
		q.add(buf);
	}
	q.add("\"");
	if (q.cut) /* only a backend's refusal of a text longer than any devargs */
		memcpy(q.p + q.len - 3, "...", 3);
	return q.p;
}

/* Room for the shown form of any piece of devargs: four characters per byte ("\x01"), quotes. */
constexpr size_t kShownSize = 4 * MLX5_QPN_DEVARGS_MAX + 3;

} /* namespace mlx5_qpn_dev_impl */

#endif /* MLX5_QPN_TEXT_H */
