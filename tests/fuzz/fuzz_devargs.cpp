/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target: the devargs parser (mlx5_qpn_devargs_parse). Properties besides "no crash,
 * no sanitizer report": a refused string returns -EINVAL; an accepted one names a device, and
 * parsing it again gives the same result (the parser is deterministic and keeps no state).
 */
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include <rte_log.h>

#include "mlx5_qpn_devargs.h"

/* The parser logs through the driver's log type, which lives in the library's dev layer. */
extern "C" {
int mlx5_qpn_dev_logtype = RTE_LOGTYPE_USER1;
}

extern "C" int
LLVMFuzzerInitialize(int *, char ***)
{
	rte_log_set_global_level(RTE_LOG_CRIT);
	return 0;
}

extern "C" int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	std::string s(reinterpret_cast<const char *>(data), size);
	s = s.c_str(); /* stop at the first NUL, as a C caller would */
	struct mlx5_qpn_devargs a, b;
	int rc = mlx5_qpn_devargs_parse(s.c_str(), &a);
	if (rc != 0 && rc != -EINVAL)
		__builtin_trap();
	if (rc == 0) {
		if (a.name[0] == '\0' || mlx5_qpn_devargs_parse(s.c_str(), &b) != 0 ||
		    memcmp(&a, &b, sizeof(a)) != 0)
			__builtin_trap();
	}
	return 0;
}
