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

/* What /proc/cpuinfo says of the first CPU: the fields a figure's CPU is named by. */
struct cpu_id {
	char model_name[128] = "unknown";
	char family[16] = "?";
	char model[16] = "?";
	char stepping[16] = "?";
	char microcode[32] = "?";
	bool vm = false;
};

/* The value of a "key<tabs>: value" line whose key is `key`, copied into buf; false if not. */
bool
cpuinfo_field(const char *line, const char *key, char *buf, size_t len)
{
	size_t n = strlen(key);

	if (strncmp(line, key, n) != 0 || (line[n] != ' ' && line[n] != '\t' && line[n] != ':'))
		return false;
	const char *v = strchr(line, ':');
	if (v == nullptr)
		return false;
	v += strspn(v + 1, " \t") + 1;
	snprintf(buf, len, "%.*s", (int)strcspn(v, "\n"), v);
	return true;
}

cpu_id
read_cpu_id()
{
	cpu_id id;
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[4096]; /* the flags line is long */

	if (f == nullptr)
		return id;
	while (fgets(line, sizeof(line), f) != nullptr && line[0] != '\n') {
		char flags[8];

		if (cpuinfo_field(line, "model name", id.model_name, sizeof(id.model_name)) ||
		    cpuinfo_field(line, "cpu family", id.family, sizeof(id.family)) ||
		    cpuinfo_field(line, "model", id.model, sizeof(id.model)) ||
		    cpuinfo_field(line, "stepping", id.stepping, sizeof(id.stepping)) ||
		    cpuinfo_field(line, "microcode", id.microcode, sizeof(id.microcode)))
			continue;
		if (cpuinfo_field(line, "flags", flags, sizeof(flags)))
			id.vm = strstr(line, " hypervisor") != nullptr;
	}
	fclose(f);
	return id;
}

} /* namespace */

void
run_meta_cpu(char *buf, size_t len)
{
	cpu_id id = read_cpu_id();

	snprintf(buf, len, "%s (family %s model %s stepping %s, microcode %s%s)", id.model_name,
		 id.family, id.model, id.stepping, id.microcode, id.vm ? ", VM" : "");
}

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
	cpu_id id = read_cpu_id();
	char when[32];
	struct utsname u = {};
	time_t now = time(nullptr);
	struct tm tm_utc = {};

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
	js.kv("cpu_model", id.model_name);
	js.kv("cpu_family", id.family);
	js.kv("cpu_model_number", id.model);
	js.kv("cpu_stepping", id.stepping);
	js.kv("cpu_microcode", id.microcode);
	js.kv_bool("cpu_hypervisor", id.vm);
	js.kv("online_cpus", (uint64_t)sysconf(_SC_NPROCESSORS_ONLN));
	js.kv("tsc_hz", (uint64_t)rte_get_tsc_hz());
	js.end_obj();
	js.end_obj();
}
