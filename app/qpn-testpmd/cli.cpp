/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The interactive prompt (-i), with DPDK's cmdline library: every command is a list of tokens,
 * so TAB completes and '?' lists the choices with their help strings, as in testpmd.
 *
 * The engine runs on the worker lcores between `start` and `stop`; the main lcore keeps the
 * prompt. Every run parameter has its `set` (the option's name and value, checked as the option
 * is) and changes only while stopped, except --stats-period; `show config` lists them all (those
 * fixed at start too: --allocator, --client-lcores, the hardware options) and the lcores: the
 * main one, the workers, and which of them the last start made client and server lcores. Leaving
 * the prompt (`quit`, end of input, SIGINT/SIGTERM) stops the engine and prints the summary
 * (main.cpp). Commands print to stdout; the prompt reads stdin, so a pipe can drive it.
 */
#include <cerrno>
#include <cinttypes>
#include <cstddef>
#include <cstring>
#include <string>
#include <termios.h>
#include <unistd.h>

#include <cmdline.h>
#include <cmdline_parse.h>
#include <cmdline_parse_num.h>
#include <cmdline_parse_string.h>
#include <cmdline_socket.h>

#include "opt_num.h"
#include "stats.h"
#include "testpmd.h"

namespace {

run_ctx *g_cli_ctx;
const qpn_engine **g_cli_engine;

/* cmdline_parse_inst_t ends in a flexible array, which C++ cannot initialise: this struct has
 * the same layout with a fixed number of token slots. */
struct cli_inst {
	void (*f)(void *, struct cmdline *, void *);
	void *data;
	const char *help_str;
	void *tokens[5];
};

bool
refuse_running(const char *what)
{
	if (!run_active())
		return false;
	printf("%s: stop the engine first\n", what);
	return true;
}

struct cmdline *g_cl;

/* After every command: flush, and leave the prompt if a signal came meanwhile (its read() was
 * not waiting to be interrupted). */
void
done()
{
	fflush(stdout);
	if (signal_caught() != 0 && g_cl != nullptr)
		cmdline_quit(g_cl);
}

/* ---- start / stop / quit / help ---- */
struct cmd_word {
	cmdline_fixed_string_t word;
};

void
cmd_start_parsed(void *, struct cmdline *, void *)
{
	if (run_active()) {
		printf("start: already running\n");
	} else if (g_cli_ctx->devs.empty()) {
		/* A failed re-probe (set quarantine) closed them; the engines need one. */
		printf("start: no device (the last re-probe failed): set quarantine US to probe "
		       "again\n");
	} else if (rte_lcore_count() < 2) {
		printf("start: the prompt needs a worker lcore (run with -l 0-1 or more)\n");
	} else if (run_start(g_cli_ctx, *g_cli_engine) == 0) {
		printf("started engine %s on %u worker lcore%s\n", (*g_cli_engine)->name,
		       rte_lcore_count() - 1, rte_lcore_count() == 2 ? "" : "s");
	}
	done();
}

void
cmd_stop_parsed(void *, struct cmdline *, void *)
{
	if (!run_active()) {
		printf("stop: not running\n");
	} else {
		run_stop(g_cli_ctx);
		printf("stopped engine %s\n", (*g_cli_engine)->name);
		stats_summary(stdout, g_cli_ctx, *g_cli_engine);
	}
	done();
}

void
cmd_quit_parsed(void *, struct cmdline *cl, void *)
{
	if (run_active())
		run_stop(g_cli_ctx);
	cmdline_quit(cl);
}

void
cmd_help_parsed(void *, struct cmdline *, void *)
{
	printf("commands (TAB completes, '?' lists choices):\n"
	       "  start                       run the engine on the worker lcores\n"
	       "  stop                        stop it and print the summary\n"
	       "  show stats                  running: this start's clock and the total, rates\n"
	       "                              since the last show;\n"
	       "                              stopped: the summary with per-step latency\n"
	       "  show lcore stats            per-lcore connections and rejects\n"
	       "  show device                 devices, their ranges and counters, CM settings\n"
	       "  show pool                   the QPN pool(s)\n"
	       "  show config                 every run parameter\n"
	       "  set engine NAME             dci-reconnect | dct-accept | churn | alloc\n"
	       "  set quarantine US           re-probe the devices with this quarantine (us);\n"
	       "                              the statistics start again\n"
	       "  set cm-policy live|strict   CM timewait policy of the next start\n"
	       "  set PARAM VALUE             duration | connections | inflight | peers | burst |\n"
	       "                              hold | msgs-per-conn | seed | cm-plt | cm-ack-delay |\n"
	       "                              stats-period | server-lcores, as the option\n"
	       "                              --PARAM=VALUE (duration: batch mode only)\n"
	       "  clear stats                 zero connections, steps, rejects, CM, pool and\n"
	       "                              device counters and the timeline (stopped)\n"
	       "  help                        this text\n"
	       "  quit                        stop, print the summary (and JSON) and leave\n");
	done();
}

cmdline_parse_token_string_t tok_start = TOKEN_STRING_INITIALIZER(cmd_word, word, "start");
cmdline_parse_token_string_t tok_stop = TOKEN_STRING_INITIALIZER(cmd_word, word, "stop");
cmdline_parse_token_string_t tok_quit = TOKEN_STRING_INITIALIZER(cmd_word, word, "quit");
cmdline_parse_token_string_t tok_help = TOKEN_STRING_INITIALIZER(cmd_word, word, "help");

cli_inst cmd_start = {
	.f = cmd_start_parsed,
	.data = nullptr,
	.help_str = "start: run the engine on the worker lcores",
	.tokens = {&tok_start, nullptr},
};
cli_inst cmd_stop = {
	.f = cmd_stop_parsed,
	.data = nullptr,
	.help_str = "stop: stop the engine, print the summary",
	.tokens = {&tok_stop, nullptr},
};
cli_inst cmd_quit = {
	.f = cmd_quit_parsed,
	.data = nullptr,
	.help_str = "quit: stop and leave",
	.tokens = {&tok_quit, nullptr},
};
cli_inst cmd_help = {
	.f = cmd_help_parsed,
	.data = nullptr,
	.help_str = "help: list the commands",
	.tokens = {&tok_help, nullptr},
};

/* ---- show stats|device|pool, show lcore stats, clear stats ---- */
struct cmd_two {
	cmdline_fixed_string_t a;
	cmdline_fixed_string_t b;
};
struct cmd_three {
	cmdline_fixed_string_t a;
	cmdline_fixed_string_t b;
	cmdline_fixed_string_t c;
};

/* Lcore ids as a list ("1,2", or "(none)"). */
std::string
lcore_list(const bool *in)
{
	std::string s;
	for (unsigned lc = 0; lc < RTE_MAX_LCORE; lc++)
		if (in[lc]) {
			if (!s.empty())
				s += ',';
			s += std::to_string(lc);
		}
	return s.empty() ? "(none)" : s;
}

/* `show config`'s lcores: the workers' roles are assigned at each start (testpmd.h's layout,
 * from --server-lcores, --co-poll and --role), so the roles shown are the last start's. */
void
show_lcores(FILE *f, const run_ctx *ctx)
{
	bool workers[RTE_MAX_LCORE] = {}, clients[RTE_MAX_LCORE] = {}, servers[RTE_MAX_LCORE] = {};
	bool assigned = false;
	unsigned lc;
	RTE_LCORE_FOREACH_WORKER(lc)
	workers[lc] = true;
	for (lc = 0; lc < RTE_MAX_LCORE; lc++) {
		clients[lc] = ctx->role[lc].client;
		servers[lc] = ctx->role[lc].server;
		assigned |= clients[lc] || servers[lc];
	}
	fprintf(f, "  %-14s main %u (the prompt), workers %s\n", "lcores", rte_get_main_lcore(),
		lcore_list(workers).c_str());
	if (!assigned) {
		fprintf(f, "  %-14s (client and server lcores are assigned at start)\n", "roles");
		return;
	}
	fprintf(f, "  %-14s client lcores %s, server lcores %s (the last start's)\n", "roles",
		lcore_list(clients).c_str(), lcore_list(servers).c_str());
}

void
cmd_show_parsed(void *res, struct cmdline *, void *)
{
	auto *r = static_cast<cmd_two *>(res);
	if (strcmp(r->b, "stats") == 0) {
		if (run_active())
			stats_show_running(stdout, g_cli_ctx, *g_cli_engine);
		else if (run_engine() == nullptr)
			printf("show stats: nothing run yet (start the engine first)\n");
		else
			stats_summary(stdout, g_cli_ctx, *g_cli_engine);
	} else if (strcmp(r->b, "device") == 0) {
		show_device(stdout, g_cli_ctx);
	} else if (strcmp(r->b, "config") == 0) {
		config_show(stdout, *g_cli_ctx->cfg);
		show_lcores(stdout, g_cli_ctx);
	} else {
		show_pool(stdout, g_cli_ctx);
	}
	done();
}

void
cmd_show_lcore_parsed(void *, struct cmdline *, void *)
{
	stats_lcores(stdout, g_cli_ctx);
	done();
}

void
cmd_clear_parsed(void *, struct cmdline *, void *)
{
	/* While running, the step histograms are the lcores' own: clear once stopped. */
	if (!refuse_running("clear stats")) {
		stats_clear(g_cli_ctx);
		printf("statistics cleared: connections, steps, rejects, data path, CM, pool and "
		       "device counters, timeline\n");
	}
	done();
}

cmdline_parse_token_string_t tok_show = TOKEN_STRING_INITIALIZER(cmd_two, a, "show");
cmdline_parse_token_string_t tok_show_what = TOKEN_STRING_INITIALIZER(cmd_two, b,
								      "stats#device#pool#config");
cmdline_parse_token_string_t tok_show3 = TOKEN_STRING_INITIALIZER(cmd_three, a, "show");
cmdline_parse_token_string_t tok_lcore = TOKEN_STRING_INITIALIZER(cmd_three, b, "lcore");
cmdline_parse_token_string_t tok_lstats = TOKEN_STRING_INITIALIZER(cmd_three, c, "stats");
cmdline_parse_token_string_t tok_clear = TOKEN_STRING_INITIALIZER(cmd_two, a, "clear");
cmdline_parse_token_string_t tok_clear_stats = TOKEN_STRING_INITIALIZER(cmd_two, b, "stats");

cli_inst cmd_show = {
	.f = cmd_show_parsed,
	.data = nullptr,
	.help_str = "show stats|device|pool|config: summary, devices and CM settings, QPN pools, "
		    "run parameters",
	.tokens = {&tok_show, &tok_show_what, nullptr},
};
cli_inst cmd_show_lcore = {
	.f = cmd_show_lcore_parsed,
	.data = nullptr,
	.help_str = "show lcore stats: per-lcore connections and rejects",
	.tokens = {&tok_show3, &tok_lcore, &tok_lstats, nullptr},
};
cli_inst cmd_clear = {
	.f = cmd_clear_parsed,
	.data = nullptr,
	.help_str = "clear stats: zero every counter shown (stopped)",
	.tokens = {&tok_clear, &tok_clear_stats, nullptr},
};

/* ---- set engine NAME, set cm-policy P, set quarantine N ---- */
struct cmd_set_str {
	cmdline_fixed_string_t set;
	cmdline_fixed_string_t what;
	cmdline_fixed_string_t value;
};
struct cmd_set_num {
	cmdline_fixed_string_t set;
	cmdline_fixed_string_t what;
	cmdline_fixed_string_t value; /* any one token, parsed by opt_num_u64() */
};

void
cmd_set_engine_parsed(void *res, struct cmdline *, void *)
{
	auto *r = static_cast<cmd_set_str *>(res);
	if (!refuse_running("set engine")) {
		const qpn_engine *e = engine_find(r->value);
		if (e == nullptr) {
			printf("set engine: unknown engine \"%s\"\n", r->value);
		} else {
			*g_cli_engine = e;
			g_cli_ctx->cfg->engine = e->name;
			printf("engine: %s\n", e->name);
		}
	}
	done();
}

void
cmd_set_policy_parsed(void *res, struct cmdline *, void *)
{
	auto *r = static_cast<cmd_set_str *>(res);
	if (!refuse_running("set cm-policy")) {
		g_cli_ctx->cfg->policy = strcmp(r->value, "live") == 0 ? MLX5_QPN_CM_POLICY_LIVE :
									 MLX5_QPN_CM_POLICY_STRICT;
		printf("CM policy: %s (from the next start)\n", r->value);
	}
	done();
}

void
cmd_set_quarantine_parsed(void *res, struct cmdline *, void *)
{
	auto *r = static_cast<cmd_set_num *>(res);
	if (refuse_running("set quarantine")) {
		done();
		return;
	}
	/* The value is a string token parsed by the apps' one number parser: cmdline's own
	 * RTE_UINT64 token takes 0x/0b/octal forms and answers a bad value with "Bad arguments",
	 * which names neither the command nor the value. */
	uint64_t us;
	std::string why;
	if (!opt_num_u64(r->value, 0, kMaxQuarantineUs, &us, &why)) {
		printf("%s\n",
		       opt_num_error("qpn-testpmd", "set quarantine", r->value, why).c_str());
		done();
		return;
	}
	/* The new quarantine replaces a devarg quarantine_us the user gave. */
	for (auto &d : g_cli_ctx->cfg->devargs)
		d = devargs_without_key(d, "quarantine_us");
	int rc = devices_reprobe(g_cli_ctx, static_cast<int64_t>(us));
	if (rc != 0) {
		printf("set quarantine: re-probe failed: %s (no device: set quarantine again, or "
		       "quit)\n",
		       strerror(-rc));
	} else {
		printf("quarantine: %" PRIu64 " us (devices re-probed; statistics start again)\n",
		       us);
		quarantine_warn(g_cli_ctx);
	}
	done();
}

void
cmd_set_param_parsed(void *res, struct cmdline *, void *)
{
	auto *r = static_cast<cmd_set_num *>(res);
	const std::string shown = std::string("set ") + r->what;
	/* The progress period is read by the next run's monitor; the others by the engine. */
	if (strcmp(r->what, "stats-period") != 0 && refuse_running(shown.c_str())) {
		done();
		return;
	}
	std::string why;
	if (config_set(g_cli_ctx->cfg, r->what, r->value, &why) != 0)
		printf("%s\n", opt_num_error("qpn-testpmd", shown.c_str(), r->value, why).c_str());
	else
		printf("%s: %s%s\n", r->what, r->value,
		       strcmp(r->what, "duration") == 0 ? duration_note(*g_cli_ctx->cfg) : "");
	done();
}

cmdline_parse_token_string_t tok_set_e = TOKEN_STRING_INITIALIZER(cmd_set_str, set, "set");
cmdline_parse_token_string_t tok_engine = TOKEN_STRING_INITIALIZER(cmd_set_str, what, "engine");
cmdline_parse_token_string_t tok_engine_name =
	TOKEN_STRING_INITIALIZER(cmd_set_str, value, "dci-reconnect#dct-accept#churn#alloc");
cmdline_parse_token_string_t tok_set_p = TOKEN_STRING_INITIALIZER(cmd_set_str, set, "set");
cmdline_parse_token_string_t tok_policy = TOKEN_STRING_INITIALIZER(cmd_set_str, what, "cm-policy");
cmdline_parse_token_string_t tok_policy_name = TOKEN_STRING_INITIALIZER(cmd_set_str, value,
									"live#strict");
cmdline_parse_token_string_t tok_set_q = TOKEN_STRING_INITIALIZER(cmd_set_num, set, "set");
cmdline_parse_token_string_t tok_quar = TOKEN_STRING_INITIALIZER(cmd_set_num, what, "quarantine");
cmdline_parse_token_string_t tok_quar_us = TOKEN_STRING_INITIALIZER(cmd_set_num, value, nullptr);
cmdline_parse_token_string_t tok_set_n = TOKEN_STRING_INITIALIZER(cmd_set_num, set, "set");
cmdline_parse_token_string_t tok_param = TOKEN_STRING_INITIALIZER(cmd_set_num, what, config_names);
cmdline_parse_token_string_t tok_param_v = TOKEN_STRING_INITIALIZER(cmd_set_num, value, nullptr);

cli_inst cmd_set_engine = {
	.f = cmd_set_engine_parsed,
	.data = nullptr,
	.help_str = "set engine dci-reconnect|dct-accept|churn|alloc: engine of the next start",
	.tokens = {&tok_set_e, &tok_engine, &tok_engine_name, nullptr},
};
cli_inst cmd_set_policy = {
	.f = cmd_set_policy_parsed,
	.data = nullptr,
	.help_str = "set cm-policy live|strict: CM timewait policy of the next start",
	.tokens = {&tok_set_p, &tok_policy, &tok_policy_name, nullptr},
};
cli_inst cmd_set_quarantine = {
	.f = cmd_set_quarantine_parsed,
	.data = nullptr,
	.help_str = "set quarantine <us>: re-probe the devices with this quarantine",
	.tokens = {&tok_set_q, &tok_quar, &tok_quar_us, nullptr},
};

cli_inst cmd_set_param = {
	.f = cmd_set_param_parsed,
	.data = nullptr,
	.help_str =
		"set duration|connections|inflight|peers|burst|hold|msgs-per-conn|seed|cm-plt|"
		"cm-ack-delay|stats-period|server-lcores <value>: a run parameter, as its option",
	.tokens = {&tok_set_n, &tok_param, &tok_param_v, nullptr},
};

cmdline_parse_ctx_t cli_ctx[] = {
	reinterpret_cast<cmdline_parse_inst_t *>(&cmd_start),
	reinterpret_cast<cmdline_parse_inst_t *>(&cmd_stop),
	reinterpret_cast<cmdline_parse_inst_t *>(&cmd_show_lcore),
	reinterpret_cast<cmdline_parse_inst_t *>(&cmd_show),
	reinterpret_cast<cmdline_parse_inst_t *>(&cmd_set_engine),
	reinterpret_cast<cmdline_parse_inst_t *>(&cmd_set_policy),
	reinterpret_cast<cmdline_parse_inst_t *>(&cmd_set_quarantine),
	reinterpret_cast<cmdline_parse_inst_t *>(&cmd_set_param),
	reinterpret_cast<cmdline_parse_inst_t *>(&cmd_clear),
	reinterpret_cast<cmdline_parse_inst_t *>(&cmd_help),
	reinterpret_cast<cmdline_parse_inst_t *>(&cmd_quit),
	nullptr,
};

/*
 * cmdline puts the terminal in raw mode with ISIG off (its terminal_adjust()), so Ctrl-C at the
 * prompt reaches the line editor as a character it ignores, where every other way out of a run
 * here is SIGINT. Turned back on, the terminal sends SIGINT, which interrupts the prompt's read
 * (signals_install(): no SA_RESTART), and the prompt ends as on a signal in batch mode: engine
 * stopped, summary, exit 130 (main.cpp). cmdline_stdin_exit() restores the terminal as it was.
 */
void
ctrl_c_as_signal()
{
	struct termios t;
	if (isatty(STDIN_FILENO) == 0 || tcgetattr(STDIN_FILENO, &t) != 0)
		return;
	t.c_lflag |= ISIG;
	tcsetattr(STDIN_FILENO, TCSANOW, &t);
}

} /* namespace */

int
cli_run(run_ctx *ctx, const qpn_engine **engine)
{
	g_cli_ctx = ctx;
	g_cli_engine = engine;
	/* Before the prompt, which cmdline_stdin_new() prints; it writes to the fd directly: flush
	 * to keep the order. */
	printf("qpn-testpmd interactive: engine %s; type help\n", (*engine)->name);
	fflush(stdout);
	struct cmdline *cl = cmdline_stdin_new(cli_ctx, "qpn-testpmd> ");
	if (cl == nullptr) {
		fprintf(stderr, "qpn-testpmd: cannot open the prompt\n");
		return -ENOMEM;
	}
	g_cl = cl;
	ctrl_c_as_signal();
	if (signal_caught() == 0)
		cmdline_interact(cl);
	g_cl = nullptr;
	cmdline_stdin_exit(cl);
	printf("\nbye\n");
	return 0;
}
