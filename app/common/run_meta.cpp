/* SPDX-License-Identifier: BSD-3-Clause */
#include "run_meta.h"

#include <cstdio>
#include <cstring>
#include <ctime>
#include <sys/utsname.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_version.h>

#include <mlx5_qpn/mlx5_qpn_config.h>

#include "json_writer.h"
#include "run_meta_rev.h" /* QPN_GIT_REVISION, generated at build time (vcs_tag) */

namespace {

/* A copy of the pointer array: rte_eal_init() and the apps reorder argv itself. */
constexpr int kMaxSavedArgs = 256;
int saved_argc;
const char *saved_argv[kMaxSavedArgs];

/* The "model name" line of /proc/cpuinfo, or "unknown". */
void
cpu_model(char *buf, size_t len)
{
	snprintf(buf, len, "unknown");
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (f == nullptr)
		return;
	char line[256];
	while (fgets(line, sizeof(line), f) != nullptr) {
		if (strncmp(line, "model name", 10) != 0)
			continue;
		const char *v = strchr(line, ':');
		if (v == nullptr)
			break;
		v += strspn(v + 1, " \t") + 1;
		snprintf(buf, len, "%.*s", (int)strcspn(v, "\n"), v);
		break;
	}
	fclose(f);
}

} /* namespace */

void
run_meta_save_argv(int argc, char **argv)
{
	saved_argc = argc < kMaxSavedArgs ? argc : kMaxSavedArgs;
	for (int i = 0; i < saved_argc; i++)
		saved_argv[i] = argv[i];
}

void
run_meta_json(json_writer &js, const char *tool)
{
	char model[160];
	char when[32];
	struct utsname u = {};
	time_t now = time(nullptr);
	struct tm tm_utc = {};

	cpu_model(model, sizeof(model));
	uname(&u);
	gmtime_r(&now, &tm_utc);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm_utc);

	js.key("meta");
	js.obj();
	js.kv("tool", tool);
	js.kv("version", MLX5_QPN_VERSION);
	js.kv("git_revision", QPN_GIT_REVISION);
	js.kv("dpdk_version", rte_version());
	js.kv("date_utc", when);
	/* The command line as typed; the EAL part is everything before the first "--". */
	js.key("argv");
	js.arr();
	for (int i = 0; i < saved_argc; i++)
		js.str(saved_argv[i]);
	js.end_arr();
	js.key("eal_args");
	js.arr();
	for (int i = 1; i < saved_argc && strcmp(saved_argv[i], "--") != 0; i++)
		js.str(saved_argv[i]);
	js.end_arr();
	js.key("machine");
	js.obj();
	js.kv("hostname", u.nodename);
	js.kv("kernel", u.release);
	js.kv("arch", u.machine);
	js.kv("cpu_model", model);
	js.kv("online_cpus", (uint64_t)sysconf(_SC_NPROCESSORS_ONLN));
	js.kv("tsc_hz", (uint64_t)rte_get_tsc_hz());
	js.end_obj();
	js.end_obj();
}
