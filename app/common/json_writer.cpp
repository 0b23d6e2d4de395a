/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * json_writer over libjansson: the tree is built as the caller nests, written once when the
 * outermost value closes. jansson does the escaping, number formatting and member order.
 */
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <jansson.h>

#include "json_writer.h"

json_writer::~json_writer()
{
	/* An unbalanced writer still owns its tree: the bottom of the stack holds all of it. */
	if (depth_ > 0)
		json_decref(stack_[0]);
	free(key_);
}

/*
 * Attach v (a new reference, or NULL after an allocation failure) where the caller is: as the
 * pending member of the innermost object, appended to the innermost array, or as the root.
 * A container is also pushed, so later values go into it.
 */
void
json_writer::add(json_t *v, bool container)
{
	if (v == nullptr) {
		ok_ = false;
		return;
	}
	if (depth_ > 0) {
		json_t *top = stack_[depth_ - 1];
		int rc;

		if (json_is_object(top)) {
			rc = key_ != nullptr ? json_object_set_new(top, key_, v) : -1;
			free(key_);
			key_ = nullptr;
		} else {
			rc = json_array_append_new(top, v);
		}
		if (rc != 0) {
			/* jansson released v on failure (the _new variants steal the reference). */
			ok_ = false;
			return;
		}
	} else if (!container) {
		/* A bare scalar as the whole document. */
		if (json_dumpf(v, f_, JSON_ENCODE_ANY) != 0)
			ok_ = false;
		json_decref(v);
		return;
	}
	if (!container)
		return;
	if (depth_ >= kMaxDepth) {
		ok_ = false;
		return;
	}
	stack_[depth_++] = v;
}

void
json_writer::close(bool object)
{
	if (depth_ == 0 || json_is_object(stack_[depth_ - 1]) != static_cast<int>(object)) {
		ok_ = false;
		return;
	}
	depth_--;
	if (depth_ > 0)
		return;
	/* The outermost value: write it, with the trailing newline of a text file. */
	if (json_dumpf(stack_[0], f_, JSON_INDENT(2) | JSON_REAL_PRECISION(6)) != 0 ||
	    fputc('\n', f_) == EOF)
		ok_ = false;
	json_decref(stack_[0]);
	stack_[0] = nullptr;
}

void
json_writer::key(const char *k)
{
	free(key_);
	key_ = strdup(k != nullptr ? k : "");
	if (key_ == nullptr)
		ok_ = false;
}

void
json_writer::obj()
{
	add(json_object(), true);
}

void
json_writer::arr()
{
	add(json_array(), true);
}

void
json_writer::end_obj()
{
	close(true);
}

void
json_writer::end_arr()
{
	close(false);
}

void
json_writer::str(const char *s)
{
	if (s == nullptr)
		add(json_null(), false);
	else
		add(json_string(s), false);
}

void
json_writer::num(uint64_t v)
{
	/* json_int_t is signed 64-bit: beyond it, the nearest double keeps the magnitude. */
	if (v > (uint64_t)INT64_MAX)
		add(json_real((double)v), false);
	else
		add(json_integer((json_int_t)v), false);
}

void
json_writer::num(double v)
{
	add(std::isfinite(v) ? json_real(v) : json_null(), false);
}

void
json_writer::boolean(bool v)
{
	add(json_boolean(v), false);
}

void
json_writer::null()
{
	add(json_null(), false);
}
