/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_APP_JSON_WRITER_H
#define QPN_APP_JSON_WRITER_H

/**
 * @file
 * The apps' JSON output, built with libjansson (installed with DPDK's development files) behind
 * the streaming interface the apps were written against.
 *
 * The caller nests begin/end calls and members as if it streamed; the writer builds a jansson
 * tree and writes it (indented, members in the order they were added) when the outermost value
 * is closed. Non-finite doubles become null, since JSON has no NaN or infinity.
 *
 * Not thread-safe: one writer per thread. Allocation failures inside jansson are not thrown;
 * they make ok() false.
 */

#include <cstdint>
#include <cstdio>

using json_t = struct json_t;

struct json_writer {
	explicit json_writer(FILE *f) : f_(f) {}
	~json_writer();
	json_writer(const json_writer &) = delete;
	json_writer &operator=(const json_writer &) = delete;

	/* Values: inside an array, or after key(). */
	void obj();
	void arr();
	void end_obj();
	void end_arr();
	void str(const char *s);
	void num(uint64_t v);
	void num(double v);
	void boolean(bool v);
	void null();

	/* Members of an object. */
	void key(const char *k);
	void kv(const char *k, const char *v)
	{
		key(k);
		str(v);
	}
	void kv(const char *k, uint64_t v)
	{
		key(k);
		num(v);
	}
	void kv(const char *k, double v)
	{
		key(k);
		num(v);
	}
	void kv_bool(const char *k, bool v)
	{
		key(k);
		boolean(v);
	}

	/**
	 * True if nothing went wrong so far: balanced calls, every value accepted by jansson and,
	 * once the outermost value is closed, the file written.
	 */
	bool ok() const { return ok_ && ferror(f_) == 0; }

private:
	void add(json_t *v, bool container);
	void close(bool object);

	static constexpr int kMaxDepth = 32;
	FILE *f_;
	json_t *stack_[kMaxDepth] = {};
	int depth_ = 0;
	char *key_ = nullptr; /* pending member name, owned (strdup) */
	bool ok_ = true;
};

#endif /* QPN_APP_JSON_WRITER_H */
