/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TESTS_HW_TEST_UTIL_H
#define QPN_TESTS_HW_TEST_UTIL_H

/* Helpers of the hw tests: what the backend logged, line by line. */

#include <rte_log.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace hwtest {

/* Capture rte_log output of one block of code. */
class LogCapture {
public:
	LogCapture() : saved_(rte_log_get_stream())
	{
		mem_ = open_memstream(&buf_, &len_);
		rte_openlog_stream(mem_);
	}
	~LogCapture()
	{
		stop();
		free(buf_);
	}
	std::string text()
	{
		stop();
		return buf_ != nullptr ? std::string(buf_, len_) : std::string();
	}

private:
	void stop()
	{
		if (mem_ == nullptr)
			return;
		rte_openlog_stream(saved_);
		fclose(mem_);
		mem_ = nullptr;
	}
	FILE *saved_;
	FILE *mem_ = nullptr;
	char *buf_ = nullptr;
	size_t len_ = 0;
};

/* How often `what` occurs in s (overlapping occurrences counted). */
inline size_t
count(const std::string &s, const std::string &what)
{
	size_t n = 0;
	for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1))
		n++;
	return n;
}

inline size_t
count_lines(const std::string &s)
{
	size_t n = 0;
	for (char c : s)
		n += c == '\n';
	return n;
}

} // namespace hwtest

#endif /* QPN_TESTS_HW_TEST_UTIL_H */
