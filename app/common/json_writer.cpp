/* SPDX-License-Identifier: BSD-3-Clause */
#include <math.h>

#include "json_writer.h"

void
json_writer::newline()
{
	fputc('\n', f_);
	for (int i = 0; i < depth_; i++)
		fputs("  ", f_);
}

/* Separator and indentation owed before any value or key at the current level. */
void
json_writer::before_value()
{
	if (after_key_) {
		after_key_ = false;
		return;
	}
	if (depth_ == 0)
		return;
	if (!first_[depth_])
		fputc(',', f_);
	first_[depth_] = false;
	newline();
}

void
json_writer::key(const char *k)
{
	before_value();
	write_str(k != nullptr ? k : "");
	fputs(": ", f_);
	after_key_ = true;
}

void
json_writer::obj()
{
	before_value();
	fputc('{', f_);
	if (depth_ + 1 >= max_depth) {
		ok_ = false;
		return;
	}
	first_[++depth_] = true;
}

void
json_writer::arr()
{
	before_value();
	fputc('[', f_);
	if (depth_ + 1 >= max_depth) {
		ok_ = false;
		return;
	}
	first_[++depth_] = true;
}

void
json_writer::end_obj()
{
	bool empty;

	if (depth_ == 0) {
		ok_ = false;
		return;
	}
	empty = first_[depth_];
	depth_--;
	if (!empty)
		newline();
	fputc('}', f_);
	if (depth_ == 0)
		fputc('\n', f_);
}

void
json_writer::end_arr()
{
	bool empty;

	if (depth_ == 0) {
		ok_ = false;
		return;
	}
	empty = first_[depth_];
	depth_--;
	if (!empty)
		newline();
	fputc(']', f_);
}

void
json_writer::str(const char *s)
{
	if (s == nullptr) {
		null();
		return;
	}
	before_value();
	write_str(s);
}

void
json_writer::write_str(const char *s)
{
	fputc('"', f_);
	for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
		switch (*p) {
		case '"':
			fputs("\\\"", f_);
			break;
		case '\\':
			fputs("\\\\", f_);
			break;
		case '\n':
			fputs("\\n", f_);
			break;
		case '\t':
			fputs("\\t", f_);
			break;
		case '\r':
			fputs("\\r", f_);
			break;
		default:
			if (*p < 0x20)
				fprintf(f_, "\\u%04x", *p);
			else
				fputc(*p, f_);
		}
	}
	fputc('"', f_);
}

void
json_writer::num(uint64_t v)
{
	before_value();
	fprintf(f_, "%llu", (unsigned long long)v);
}

void
json_writer::num(double v)
{
	before_value();
	if (!isfinite(v))
		fputs("null", f_);
	else
		fprintf(f_, "%.6g", v);
}

void
json_writer::boolean(bool v)
{
	before_value();
	fputs(v ? "true" : "false", f_);
}

void
json_writer::null()
{
	before_value();
	fputs("null", f_);
}
