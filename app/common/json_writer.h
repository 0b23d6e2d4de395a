/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_APP_JSON_WRITER_H
#define QPN_APP_JSON_WRITER_H

/**
 * @file
 * A minimal streaming JSON writer for the apps (no JSON library is installed, and the apps need
 * only objects, arrays, strings, integers, doubles and booleans).
 *
 * Commas and indentation are handled by the writer; the caller only nests begin/end calls.
 * Non-finite doubles are written as null, since JSON has no NaN or infinity.
 */

#include <stdint.h>
#include <stdio.h>

struct json_writer {
	explicit json_writer(FILE *f) : f_(f) {}

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

	/** True if nothing went wrong so far (unbalanced calls or a failed write). */
	bool ok() const { return ok_ && ferror(f_) == 0; }

private:
	void before_value();
	void write_str(const char *s);
	void newline();

	static constexpr int max_depth = 32;
	FILE *f_;
	int depth_ = 0;
	bool first_[max_depth] = {true};
	bool after_key_ = false;
	bool ok_ = true;
};

#endif /* QPN_APP_JSON_WRITER_H */
