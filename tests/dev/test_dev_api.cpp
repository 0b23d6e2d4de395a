/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver's generic layer: devargs (good and bad), probe on the emulated device, the
 * reserved-QPN API, source selection under every support fault, the hardware path without a
 * device, and the API under concurrent use.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <rte_log.h>

#include "mlx5_qpn.h"
#include "mlx5_qpn_backend.h"
#include "mlx5_qpn_dev_internal.h"
#include "mlx5_qpn_devargs.h"
#include "mlx5_qpn_ops.h"
#include "hw/mlx5_qpn_hw.h"
#include "sim/mlx5_qpn_sim.h"
#include "sim/mlx5_qpn_sim_devargs.h"

namespace {

/* The emulated device's own keys inside parsed devargs. */
const mlx5_qpn_sim_devargs &
sim_args(const mlx5_qpn_devargs &da)
{
	return *mlx5_qpn_sim_cargs(&da);
}

/* A unique emulated device per test (its shared memory is machine-wide), removed afterwards. */
class SimName {
public:
	SimName()
	{
		static std::atomic<int> seq{0};
		name_ = "simdev" + std::to_string(getpid()) + "x" +
			std::to_string(seq.fetch_add(1));
	}
	~SimName() { mlx5_qpn_dev_purge(name_.c_str()); }
	const std::string &str() const { return name_; }

private:
	std::string name_;
};

struct DevargCase {
	const char *args;
	int rc;
};

} // namespace

TEST(DevArgs, GoodAndBadTable)
{
	const DevargCase cases[] = {
		{"sim0", 0},
		{"sim_a1,quarantine_us=0", 0},
		{"sim0,guid=0x0002c90300a1b2c3,ports=2,cache=32", 0},
		{"sim0,guid=0002:c903:00a1:b2c3", 0},
		{"sim0,reserved_qpn=try", 0},
		{"sim0,reserved_qpn=yes,log_gran=2,log_max_alloc=8,log_max_num=12", 0},
		{"sim0,numa=0,cores=0-1", 0},
		{"sim0,cores=0:1", 0},
		{"ib=mlx5_0", 0},
		{"ib=mlx5_0,quarantine_us=1000,cache=16", 0},
		{"", -EINVAL},
		{"mlx5_0", -EINVAL},       /* neither simN nor ib= */
		{"sim0,bogus=1", -EINVAL}, /* unknown key */
		{"sim0,cache=0", -EINVAL}, /* out of range */
		{"sim0,cache=65537", -EINVAL},
		{"sim0,cache=-1", -EINVAL},
		{"sim0,cache=12abc", -EINVAL},
		{"sim0,cache", -EINVAL},            /* bare key: NULL value in DPDK 22.11 */
		{"sim0,cache=", -EINVAL},           /* empty value */
		{"sim0,cache=8,cache=16", -EINVAL}, /* duplicate */
		{"sim0,reserved_qpn=maybe", -EINVAL},
		{"sim0,guid=0", -EINVAL},
		{"sim0,guid=xyz", -EINVAL},
		{"sim0,ports=5", -EINVAL},
		{"sim0,log_gran=5,log_max_alloc=4", -EINVAL},
		{"sim0,rsvd_first=0xFFFFF0,rsvd_count=32", -EINVAL},
		{"sim0,,cache=8", -EINVAL},
		{"sim0,cache=8,", -EINVAL},
		{"sim-0", -EINVAL},              /* bad name character */
		{"ib=mlx5_0,guid=0x1", -EINVAL}, /* emulated-only key on hardware */
		{"sim0,ib=mlx5_0", -EINVAL},     /* two devices */
		{"sim0,cores=0,1", -EINVAL},     /* ',' splits pairs: "1" is a bare key */
	};
	for (const auto &c : cases) {
		struct mlx5_qpn_devargs da;
		EXPECT_EQ(mlx5_qpn_devargs_parse(c.args, &da), c.rc)
			<< "devargs: \"" << c.args << "\"";
	}
}

/* The log lines of one parse (or, with why, of one mlx5_qpn_devargs_check()): rte_log goes to a
 * memory stream for the duration. */
static std::string
devargs_log(const char *args, int *rc, struct mlx5_qpn_devargs *da, char *why = nullptr,
	    size_t why_len = 0)
{
	char *buf = nullptr;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	FILE *saved = rte_log_get_stream();
	rte_openlog_stream(f);
	*rc = why != nullptr ? mlx5_qpn_devargs_check(args, why, why_len) :
			       mlx5_qpn_devargs_parse(args, da);
	rte_openlog_stream(saved == stderr ? nullptr : saved);
	fclose(f);
	std::string out(buf != nullptr ? buf : "", len);
	free(buf);
	return out;
}

/*
 * Every refusal of the guide (doc/guides/driver.md §3), each with the one log line it gives: the
 * offending text exactly as written (a pair with whitespace quoted, escapes visible), never a
 * piece that the kvargs tokenizer made of it ("k==v" is not reported as "=v").
 */
TEST(DevArgs, RefusalsNameTheTextAsWritten)
{
	struct Case {
		const char *args;
		const char *line; /* the whole log line */
	};
	const Case cases[] = {
		{"sim0,cache==8",
		 "mlx5_qpn.dev: bad devarg cache==8: more than one '=' (expected key=value)"},
		{"ib==mlx5_0",
		 "mlx5_qpn.dev: bad devarg ib==mlx5_0: more than one '=' (expected key=value)"},
		{"sim0,cache=8=9",
		 "mlx5_qpn.dev: bad devarg cache=8=9: more than one '=' (expected key=value)"},
		{"sim0,=8", "mlx5_qpn.dev: bad devarg =8: empty key"},
		{"sim0,cache", "mlx5_qpn.dev: bad devarg cache: bare key (expected key=value)"},
		{"sim0,cache=", "mlx5_qpn.dev: bad devarg cache=: empty value"},
		{"sim0,cache=8,",
		 "mlx5_qpn.dev: bad devarg sim0,cache=8,: empty pair (a trailing ',')"},
		{"sim0,", "mlx5_qpn.dev: bad devarg sim0,: empty pair (a trailing ',')"},
		{"sim0,,cache=8",
		 "mlx5_qpn.dev: bad devarg sim0,,cache=8: empty pair (a leading or doubled ',')"},
		{"sim0,cache=8,,ports=2",
		 "mlx5_qpn.dev: bad devarg sim0,cache=8,,ports=2: empty pair (a doubled ',')"},
		{"sim0,cache=\t8",
		 "mlx5_qpn.dev: bad devarg \"cache=\\t8\": whitespace or control character (devargs take none)"},
		{"sim0,cache=8 ",
		 "mlx5_qpn.dev: bad devarg \"cache=8 \": whitespace or control character (devargs take none)"},
		{"sim0, cache=8",
		 "mlx5_qpn.dev: bad devarg \" cache=8\": whitespace or control character (devargs take none)"},
		{"ib=mlx5 0",
		 "mlx5_qpn.dev: bad devarg \"ib=mlx5 0\": whitespace or control character (devargs take none)"},
		{"sim0 ",
		 "mlx5_qpn.dev: bad devarg \"sim0 \": whitespace or control character (devargs take none)"},
		{"sim0,cache=8,cache=16", "mlx5_qpn.dev: bad devarg cache=16: duplicate key"},
		{"sim0,colour=red", "mlx5_qpn.dev: bad devarg colour=red: unknown key"},
		{"sim0,cores=[0,1]",
		 "mlx5_qpn.dev: bad devarg cores=[0,1]: a [list] value (none of these keys takes one; cores: use 0-3 or 0:2:4)"},
		{"sim0,cache=010",
		 "mlx5_qpn.dev: bad devarg cache=010: not a number (decimal, or hex with 0x; no sign, no leading zero)"},
		{"sim0,cache=+8",
		 "mlx5_qpn.dev: bad devarg cache=+8: not a number (decimal, or hex with 0x; no sign, no leading zero)"},
		{"sim0,cache=1e3",
		 "mlx5_qpn.dev: bad devarg cache=1e3: not a number (decimal, or hex with 0x; no sign, no leading zero)"},
		{"sim0,cache=0x",
		 "mlx5_qpn.dev: bad devarg cache=0x: not a number (decimal, or hex with 0x; no sign, no leading zero)"},
		{"sim0,cache=0", "mlx5_qpn.dev: bad devarg cache=0: out of range [1, 65536]"},
		{"sim0,cache=99999999999999999999999",
		 "mlx5_qpn.dev: bad devarg cache=99999999999999999999999: out of range [1, 65536]"},
		{"sim0,guid=::1",
		 "mlx5_qpn.dev: bad devarg guid=::1: expected a non-zero 64-bit hex GUID"},
		{"sim0,guid=0x00000000000000001",
		 "mlx5_qpn.dev: bad devarg guid=0x00000000000000001: expected a non-zero 64-bit hex GUID"},
		{"sim0,cores=3-0",
		 "mlx5_qpn.dev: bad devarg cores=3-0: expected a core list such as 0-3 or 0:2:4 (< 64 characters)"},
		{"sim0,cores=0::1",
		 "mlx5_qpn.dev: bad devarg cores=0::1: expected a core list such as 0-3 or 0:2:4 (< 64 characters)"},
		{"ib=mlx5/0",
		 "mlx5_qpn.dev: bad devarg ib=mlx5/0: name may hold letters, digits, _, - and ."},
		{"ib=mlx5_0,ports=2",
		 "mlx5_qpn.dev: bad devarg ports=2: only the emulated device (simN) takes this key"},
		/* A key of another backend is read by that backend's rules first, then refused. */
		{"ib=mlx5_0,ports=9", "mlx5_qpn.dev: bad devarg ports=9: out of range [1, 4]"},
		{"ib=mlx5_0,colour=red", "mlx5_qpn.dev: bad devarg colour=red: unknown key"},
		{"sim0,log_gran=5,log_max_alloc=4",
		 "mlx5_qpn.dev: bad devarg log_gran=5: larger than log_max_alloc"},
		{"ports=2",
		 "mlx5_qpn.dev: bad devarg ports=2: no device (expected simN or ib=NAME)"},
		{"", "mlx5_qpn.dev: bad devarg \"\": no device (expected simN or ib=NAME)"},
		{"eth0",
		 "mlx5_qpn.dev: bad devarg eth0: unknown device (expected simN or ib=NAME)"},
	};
	for (const auto &c : cases) {
		struct mlx5_qpn_devargs da;
		int rc = 0;
		std::string log = devargs_log(c.args, &rc, &da);
		EXPECT_EQ(rc, -EINVAL) << "devargs: \"" << c.args << "\"";
		EXPECT_EQ(log, std::string(c.line) + "\n") << "devargs: \"" << c.args << "\"";
		/* The public check refuses the same way and gives the reason to the caller (the
		 * line without its prefix), logging nothing. */
		char why[256];
		log = devargs_log(c.args, &rc, nullptr, why, sizeof(why));
		EXPECT_EQ(rc, -EINVAL) << "devargs: \"" << c.args << "\"";
		EXPECT_EQ(log, "") << "devargs: \"" << c.args << "\"";
		std::string line(c.line);
		EXPECT_EQ(std::string(why), line.substr(line.find(": ") + 2))
			<< "devargs: \"" << c.args << "\"";
	}
	char why[64] = "x";
	EXPECT_EQ(mlx5_qpn_devargs_check("sim0,cache=8,quarantine_us=0", why, sizeof(why)), 0);
	EXPECT_STREQ(why, "");
	EXPECT_EQ(mlx5_qpn_devargs_check(nullptr, why, sizeof(why)), -EINVAL);
	EXPECT_EQ(mlx5_qpn_devargs_check("sim0,colour=red", nullptr, 0), -EINVAL);
	EXPECT_EQ(mlx5_qpn_devargs_check("sim0,colour=red", why, 8), -EINVAL);
	EXPECT_STREQ(why, "bad dev"); /* truncated to the buffer, terminated */
}

/* Numbers are decimal or 0x-hex; 0 alone is fine; GUIDs take their three documented forms. */
TEST(DevArgs, NumberAndGuidForms)
{
	struct mlx5_qpn_devargs da;
	ASSERT_EQ(mlx5_qpn_devargs_parse("sim0,cache=0x10,quarantine_us=0,limit=0X20", &da), 0);
	EXPECT_EQ(da.cache, 16u);
	EXPECT_EQ(da.quarantine_us, 0u);
	EXPECT_EQ(sim_args(da).limit, 32u);
	ASSERT_EQ(mlx5_qpn_devargs_parse("sim0,guid=00:02:c9:03:00:a1:b2:c3", &da), 0);
	EXPECT_EQ(sim_args(da).guid, 0x0002c90300a1b2c3ull);
	ASSERT_EQ(mlx5_qpn_devargs_parse("sim0,guid=0002:c903:00a1:b2c3,cores=0-1:4", &da), 0);
	EXPECT_EQ(sim_args(da).guid, 0x0002c90300a1b2c3ull);
	EXPECT_STREQ(sim_args(da).cores, "0-1:4");
	ASSERT_EQ(mlx5_qpn_devargs_parse("cache=8,ib=mlx5_bond.0-1", &da), 0);
	EXPECT_STREQ(da.name, "mlx5_bond.0-1");
}

/*
 * A vdev's name and args as the driver reads them (mlx5_qpn_vdev_devargs(): what the vdev driver
 * probes, and what an application uses to find the device the EAL probed for a vdev). A suffix
 * the emulated backend takes is the device; any other only names the vdev, and ib= names the
 * device. Refusals: not this driver's, no device named, devargs the driver refuses, a buffer too
 * small (nothing written).
 */
TEST(DevArgs, VdevNamesAndArgs)
{
	struct Case {
		const char *vdev, *args, *devargs, *name;
	} good[] = {
		{"mlx5_qpn_sim7", "quarantine_us=5000", "sim7,quarantine_us=5000", "sim7"},
		{"mlx5_qpn_sim7", nullptr, "sim7", "sim7"},
		{"mlx5_qpn_sim7", "", "sim7", "sim7"},
		{"mlx5_qpnsim3", "cache=8", "sim3,cache=8", "sim3"},
		{"mlx5_qpn0", "ib=mlx5_0,cache=64", "ib=mlx5_0,cache=64", "mlx5_0"},
		{"mlx5_qpn_a", "cache=64,ib=mlx5_bond.0-1", "cache=64,ib=mlx5_bond.0-1",
		 "mlx5_bond.0-1"},
	};
	for (const Case &c : good) {
		char da[MLX5_QPN_DEVARGS_SIZE] = "x", name[MLX5_QPN_NAME_SIZE] = "x";
		EXPECT_EQ(mlx5_qpn_vdev_devargs(c.vdev, c.args, da, sizeof(da), name, sizeof(name)),
			  0)
			<< c.vdev;
		EXPECT_STREQ(da, c.devargs) << c.vdev;
		EXPECT_STREQ(name, c.name) << c.vdev;
		/* Either output may be left out. */
		EXPECT_EQ(mlx5_qpn_vdev_devargs(c.vdev, c.args, nullptr, 0, nullptr, 0), 0)
			<< c.vdev;
	}
	struct Bad {
		const char *vdev, *args;
	} bad[] = {
		{nullptr, "ib=mlx5_0"},         /* no name */
		{"net_null0", "ib=mlx5_0"},     /* another driver's vdev */
		{"mlx5_qpn0", nullptr},         /* names no device */
		{"mlx5_qpn0", "cache=64"},      /* still none */
		{"mlx5_qpn_sim7", "bogus=1"},   /* a key the driver refuses */
		{"mlx5_qpn_sim7", "ib=mlx5_0"}, /* two devices */
	};
	for (const Bad &b : bad) {
		char da[MLX5_QPN_DEVARGS_SIZE] = "x", name[MLX5_QPN_NAME_SIZE] = "x";
		EXPECT_EQ(mlx5_qpn_vdev_devargs(b.vdev, b.args, da, sizeof(da), name, sizeof(name)),
			  -EINVAL)
			<< (b.vdev ? b.vdev : "(null)") << " " << (b.args ? b.args : "(null)");
		EXPECT_STREQ(da, "x");
		EXPECT_STREQ(name, "x");
	}
	char small[8] = "x", name[4] = "x", da[MLX5_QPN_DEVARGS_SIZE];
	EXPECT_EQ(mlx5_qpn_vdev_devargs("mlx5_qpn_sim7", "cache=64", small, sizeof(small), nullptr,
					0),
		  -E2BIG);
	EXPECT_STREQ(small, "x");
	EXPECT_EQ(mlx5_qpn_vdev_devargs("mlx5_qpn0", "ib=mlx5_0", da, sizeof(da), name,
					sizeof(name)),
		  -E2BIG); /* "mlx5_0" does not fit 4 bytes */
	EXPECT_STREQ(name, "x");
	/* Longer than any devargs: refused, whatever the buffer. */
	const std::string longest(MLX5_QPN_DEVARGS_SIZE, 'a');
	EXPECT_EQ(mlx5_qpn_vdev_devargs("mlx5_qpn_sim7", ("cache=" + longest).c_str(), da,
					sizeof(da), nullptr, 0),
		  -E2BIG);
}

TEST(DevArgs, ValuesAndDefaults)
{
	struct mlx5_qpn_devargs da;
	ASSERT_EQ(mlx5_qpn_devargs_parse("sim7", &da), 0);
	EXPECT_EQ(da.backend, mlx5_qpn_backend_find("sim"));
	EXPECT_STREQ(da.name, "sim7");
	EXPECT_EQ(da.reserved_qpn, MLX5_QPN_RSVD_TRY);
	EXPECT_EQ(da.quarantine_us, 2000000u);
	EXPECT_EQ(da.cache, 64u);
	EXPECT_EQ(da.low_water, 128u);
	ASSERT_EQ(mlx5_qpn_devargs_parse("ib=mlx5_3,reserved_qpn=no,quarantine_us=5", &da), 0);
	EXPECT_EQ(da.backend, mlx5_qpn_backend_find("hw"));
	EXPECT_STREQ(da.name, "mlx5_3");
	EXPECT_EQ(da.reserved_qpn, MLX5_QPN_RSVD_NO);
	EXPECT_EQ(da.quarantine_us, 5u);
	ASSERT_EQ(mlx5_qpn_devargs_parse("sim1,guid=0x0002c90300a1b2c3,log_gran=3", &da), 0);
	EXPECT_EQ(sim_args(da).guid, 0x0002c90300a1b2c3ull);
	EXPECT_EQ(sim_args(da).log_gran, 3u);
	/* A firmware command of the emulated device takes 10 us unless told otherwise: never
	 * faster than a ConnectX's (sim_devargs.cpp says why); 0 is the emulator's work alone. */
	EXPECT_EQ(sim_args(da).slow_cmd_us, 10u);
	ASSERT_EQ(mlx5_qpn_devargs_parse("sim1,slow_cmd_us=0", &da), 0);
	EXPECT_EQ(sim_args(da).slow_cmd_us, 0u);
}

TEST(DevProbe, HardwareWithoutDeviceIsEnodev)
{
	struct mlx5_qpn_dev *dev = nullptr;
	EXPECT_EQ(mlx5_qpn_dev_probe("ib=mlx5_0", &dev), -ENODEV);
	EXPECT_EQ(dev, nullptr);
	EXPECT_EQ(mlx5_qpn_dev_lookup("mlx5_0"), nullptr);
}

TEST(DevProbe, BadDevargsAreEinvalAndLeaveNothing)
{
	struct mlx5_qpn_dev *dev = nullptr;
	EXPECT_EQ(mlx5_qpn_dev_probe("sim0,cache=0", &dev), -EINVAL);
	EXPECT_EQ(mlx5_qpn_dev_probe(nullptr, &dev), -EINVAL);
	EXPECT_EQ(mlx5_qpn_dev_list(nullptr, 0), 0u);
}

TEST(DevProbe, AllocDeallocThroughTheDriver)
{
	SimName n;
	struct mlx5_qpn_dev *dev = nullptr;
	std::string args = n.str() + ",quarantine_us=0,log_max_alloc=6,max_qpns=256";
	ASSERT_EQ(mlx5_qpn_dev_probe(args.c_str(), &dev), 0);
	EXPECT_EQ(mlx5_qpn_dev_lookup(n.str().c_str()), dev);
	struct mlx5_qpn_dev *dup = nullptr;
	EXPECT_EQ(mlx5_qpn_dev_probe(args.c_str(), &dup), -EEXIST);
	struct mlx5_qpn_dev_info in;
	ASSERT_EQ(mlx5_qpn_dev_info_get(dev, &in), 0);
	EXPECT_EQ(in.source, MLX5_QPN_SRC_OBJECTS);
	EXPECT_EQ(in.log_range, 6u);
	EXPECT_STREQ(in.backend, "sim");
	EXPECT_NE(in.node_guid, 0u);
	/* Every QPN up to the limit, each once, all inside reserved ranges of 2^6. */
	std::set<uint32_t> got;
	uint32_t q;
	int rc;
	while ((rc = mlx5_qpn_reserved_alloc(dev, &q)) == 0)
		EXPECT_TRUE(got.insert(q).second);
	EXPECT_EQ(rc, -ENOSPC);
	EXPECT_EQ(got.size(), 256u);
	for (uint32_t x : got)
		EXPECT_NE(x & ~0xFFFFFFu, 1u) << "24-bit";
	struct mlx5_qpn_dev_stats st;
	ASSERT_EQ(mlx5_qpn_dev_stats_get(dev, &st), 0);
	EXPECT_EQ(st.qpns_reserved, 256u);
	EXPECT_EQ(st.ranges_reserved, 4u);
	EXPECT_EQ(st.pool.in_use, 256u);
	/* Refusals. */
	EXPECT_EQ(mlx5_qpn_reserved_dealloc(dev, 0xFFFFFF), -EINVAL);
	uint32_t some = *got.begin();
	EXPECT_EQ(mlx5_qpn_reserved_dealloc(dev, some), 0);
	EXPECT_EQ(mlx5_qpn_reserved_dealloc(dev, some), -EINVAL);
	got.erase(some);
	std::vector<uint32_t> rest(got.begin(), got.end());
	EXPECT_EQ(mlx5_qpn_reserved_dealloc_bulk(dev, rest.data(),
						 static_cast<unsigned>(rest.size())),
		  0);
	uint32_t bulk[32];
	EXPECT_EQ(mlx5_qpn_reserved_alloc_bulk(dev, bulk, 32), 0);
	EXPECT_EQ(mlx5_qpn_reserved_dealloc_bulk(dev, bulk, 32), 0);
	mlx5_qpn_dev_close(dev);
	EXPECT_EQ(mlx5_qpn_dev_lookup(n.str().c_str()), nullptr);
}

/* The 2.0 name of the lookup stays callable for one ABI and finds what the new name finds. */
TEST(DevProbe, DeprecatedLookupNameIsTheSameFunction)
{
	SimName n;
	struct mlx5_qpn_dev *dev = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe((n.str() + ",quarantine_us=0").c_str(), &dev), 0);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	EXPECT_EQ(mlx5_qpn_dev_get(n.str().c_str()), dev);
	EXPECT_EQ(mlx5_qpn_dev_get(nullptr), nullptr);
	mlx5_qpn_dev_close(dev);
	EXPECT_EQ(mlx5_qpn_dev_get(n.str().c_str()), nullptr);
#pragma GCC diagnostic pop
}

TEST(DevProbe, RangesGoBackToTheDeviceAtClose)
{
	SimName n;
	std::string args = n.str() + ",quarantine_us=0,log_max_alloc=4,max_qpns=64";
	for (int round = 0; round < 3; round++) {
		struct mlx5_qpn_dev *dev = nullptr;
		ASSERT_EQ(mlx5_qpn_dev_probe(args.c_str(), &dev), 0) << "round " << round;
		uint32_t q[64];
		ASSERT_EQ(mlx5_qpn_reserved_alloc_bulk(dev, q, 64), 0) << "round " << round;
		mlx5_qpn_dev_close(dev); /* forgets the allocated ones, returns the ranges */
	}
}

TEST(DevProbe, SourceSelectionUnderSupportFaults)
{
	struct Case {
		const char *extra;
		int rc;
		mlx5_qpn_source src;
	} cases[] = {
		{"", 0, MLX5_QPN_SRC_OBJECTS},
		{",cap_reserved_qpn=0,reserved_qpn=yes", -EOPNOTSUPP, MLX5_QPN_SRC_OBJECTS},
		{",cap_reserved_qpn=0,reserved_qpn=try", 0, MLX5_QPN_SRC_ORDINARY},
		{",reserved_qpn=no", 0, MLX5_QPN_SRC_ORDINARY},
		{",fault_nodevx=1,reserved_qpn=try", 0, MLX5_QPN_SRC_ORDINARY},
		{",fault_nodevx=1,reserved_qpn=yes", -EOPNOTSUPP, MLX5_QPN_SRC_OBJECTS},
	};
	for (const auto &c : cases) {
		SimName n;
		std::string args = n.str() + ",quarantine_us=0,log_max_alloc=4,max_qpns=64" +
				   c.extra;
		struct mlx5_qpn_dev *dev = nullptr;
		int rc = mlx5_qpn_dev_probe(args.c_str(), &dev);
		EXPECT_EQ(rc, c.rc) << args;
		if (rc != 0)
			continue;
		struct mlx5_qpn_dev_info in;
		ASSERT_EQ(mlx5_qpn_dev_info_get(dev, &in), 0);
		EXPECT_EQ(in.source, c.src) << args;
		uint32_t q;
		EXPECT_EQ(mlx5_qpn_reserved_alloc(dev, &q), 0) << args;
		EXPECT_EQ(mlx5_qpn_reserved_dealloc(dev, q), 0) << args;
		mlx5_qpn_dev_close(dev);
	}
}

/*
 * A reserved-QPN probe refused, or one that falls through to ordinary QPs, says so in one line
 * (driver.md §4): no back-off warning for a trial that is not retried, no "works again" after
 * the fall-through.
 */
TEST(DevProbe, RefusedReservedQpnProbeLogsOneLine)
{
	struct Case {
		const char *extra;
		int rc;
		const char *line; /* what the one line says */
	} cases[] = {
		{",cap_reserved_qpn=0,reserved_qpn=yes", -EOPNOTSUPP, "and reserved_qpn=yes"},
		{",fault_nodevx=1,reserved_qpn=yes", -EOPNOTSUPP, "and reserved_qpn=yes"},
		{",cap_reserved_qpn=0,reserved_qpn=try", 0,
		 "using ordinary QPs (reserved_qpn=try)"},
		{",fault_nodevx=1,reserved_qpn=try", 0, "using ordinary QPs (reserved_qpn=try)"},
	};
	for (const auto &c : cases) {
		SimName n;
		std::string args = n.str() + ",quarantine_us=0,log_max_alloc=4,max_qpns=64" +
				   c.extra;
		char *buf = nullptr;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		FILE *saved = rte_log_get_stream();
		rte_openlog_stream(f);
		struct mlx5_qpn_dev *dev = nullptr;
		int rc = mlx5_qpn_dev_probe(args.c_str(), &dev);
		rte_openlog_stream(saved == stderr ? nullptr : saved);
		fclose(f);
		std::string log(buf != nullptr ? buf : "", len);
		free(buf);
		EXPECT_EQ(rc, c.rc) << args;
		EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << args << ":\n" << log;
		EXPECT_NE(log.find(c.line), std::string::npos) << args << ":\n" << log;
		if (rc == 0)
			mlx5_qpn_dev_close(dev);
	}
}

TEST(DevProbe, DeviceLimitAndQuarantine)
{
	SimName n;
	/* 32 QPNs in total, a 60 s quarantine: after a release the next allocation is -EAGAIN. */
	std::string args = n.str() + ",quarantine_us=60000000,log_max_alloc=4,limit=32";
	struct mlx5_qpn_dev *dev = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe(args.c_str(), &dev), 0);
	uint32_t q[32], x;
	ASSERT_EQ(mlx5_qpn_reserved_alloc_bulk(dev, q, 32), 0);
	EXPECT_EQ(mlx5_qpn_reserved_alloc(dev, &x), -ENOSPC);
	ASSERT_EQ(mlx5_qpn_reserved_dealloc(dev, q[5]), 0);
	EXPECT_EQ(mlx5_qpn_reserved_alloc(dev, &x), -EAGAIN);
	struct mlx5_qpn_dev_stats st;
	ASSERT_EQ(mlx5_qpn_dev_stats_get(dev, &st), 0);
	EXPECT_EQ(st.qpns_reserved, 32u) << "the limit holds";
	mlx5_qpn_dev_close(dev);
}

TEST(DevProbe, FirmwareErrorsAreRetriedLaterNotLost)
{
	SimName n;
	/* Every command after the 3rd fails: the first range works, growing fails cleanly. */
	std::string args = n.str() +
			   ",quarantine_us=0,log_max_alloc=3,max_qpns=64,fault_fw_after=3";
	struct mlx5_qpn_dev *dev = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe(args.c_str(), &dev), 0);
	std::set<uint32_t> got;
	uint32_t x;
	int rc;
	while ((rc = mlx5_qpn_reserved_alloc(dev, &x)) == 0)
		got.insert(x);
	EXPECT_NE(rc, 0);
	EXPECT_GE(got.size(), 8u);
	EXPECT_LT(got.size(), 64u);
	struct mlx5_qpn_dev_stats st;
	ASSERT_EQ(mlx5_qpn_dev_stats_get(dev, &st), 0);
	EXPECT_GE(st.reserve_failures, 1u);
	EXPECT_NE(st.last_error, 0);
	for (uint32_t q : got)
		EXPECT_EQ(mlx5_qpn_reserved_dealloc(dev, q), 0);
	mlx5_qpn_dev_close(dev);
}

/*
 * A device whose firmware refuses every reservation (fault_fw_after=1: only the probe's first range
 * is created) is not asked again by every allocation that finds the pool empty: after a failure the
 * driver backs off (1 ms doubling to 1 s), the allocations get the pool's error without a firmware
 * command, and one warning says so. Counted in firmware commands (the emulated device's own
 * counter), not in time: 5000 failing allocations issue a handful of commands (one per back-off
 * step that ends during the burst), not 5000. The warning repeats once per 10 s of a streak, so the
 * number of lines allowed follows the streak's length (a TSan run on a loaded CI machine takes
 * 20 s over this burst); it is not a timing assertion, only the logging contract.
 */
TEST(DevProbe, FailingReservationsBackOff)
{
	SimName n;
	std::string args = n.str() +
			   ",quarantine_us=0,log_max_alloc=3,max_qpns=4096,fault_fw_after=1";
	char *buf = nullptr;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	ASSERT_NE(mem, nullptr);
	rte_openlog_stream(mem);
	struct mlx5_qpn_dev *dev = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe(args.c_str(), &dev), 0);
	std::vector<uint32_t> held;
	uint32_t x;
	while (mlx5_qpn_reserved_alloc(dev, &x) == 0)
		held.push_back(x);
	ASSERT_EQ(held.size(), 8u) << "the first range only";
	struct mlx5_qpn_sim_stats before, after;
	ASSERT_EQ(mlx5_qpn_sim_stats_get(mlx5_qpn_dev_backend(dev), &before), 0);
	const auto streak_start = std::chrono::steady_clock::now();
	const int kBurst = 5000;
	int refused = 0;
	for (int i = 0; i < kBurst; i++) {
		int rc = mlx5_qpn_reserved_alloc(dev, &x);
		EXPECT_TRUE(rc == -ENOSPC || rc == -EAGAIN) << rc;
		refused += rc != 0;
	}
	uint32_t bulk[16];
	for (int i = 0; i < 100; i++)
		EXPECT_NE(mlx5_qpn_reserved_alloc_bulk(dev, bulk, 16), 0);
	ASSERT_EQ(mlx5_qpn_sim_stats_get(mlx5_qpn_dev_backend(dev), &after), 0);
	EXPECT_EQ(refused, kBurst);
	uint64_t commands = after.commands - before.commands;
	RecordProperty("fw_commands_in_burst", std::to_string(commands));
	EXPECT_LE(commands, 64u) << "firmware commands during " << kBurst << " failing allocations";
	struct mlx5_qpn_dev_stats st;
	ASSERT_EQ(mlx5_qpn_dev_stats_get(dev, &st), 0);
	EXPECT_GT(st.backoff_skips, 0u);
	EXPECT_GE(st.reserve_failures, 1u);
	EXPECT_LE(st.reserve_failures, 64u + 2);
	EXPECT_NE(st.last_error, 0);
	const auto streak_s = std::chrono::duration_cast<std::chrono::seconds>(
				      std::chrono::steady_clock::now() - streak_start)
				      .count();
	for (uint32_t q : held)
		EXPECT_EQ(mlx5_qpn_reserved_dealloc(dev, q), 0);
	mlx5_qpn_dev_close(dev);
	rte_openlog_stream(nullptr);
	fclose(mem);
	std::string log(buf, len);
	free(buf);
	size_t first = 0, lines = 0;
	for (size_t at = 0; (at = log.find("reserving QPNs", at)) != std::string::npos; at++)
		lines++;
	first = log.find("reserving QPNs from the device failed");
	EXPECT_NE(first, std::string::npos) << log;
	/* The first warning, one repeat per 10 s of the streak, and one for a repeat that falls due
	 * between the clock read above and the close. */
	EXPECT_LE(lines, 2u + static_cast<size_t>(streak_s) / 10)
		<< "one warning per streak (and one per 10 s; the streak lasted " << streak_s
		<< " s): " << log;
}

TEST(DevConcurrency, ThreadsAllocateThroughTheDriver)
{
	SimName n;
	std::string args = n.str() + ",quarantine_us=100,log_max_alloc=5,max_qpns=1024,cache=8";
	struct mlx5_qpn_dev *dev = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe(args.c_str(), &dev), 0);
	std::atomic<uint64_t> errors{0}, ok{0};
	std::mutex m;
	std::set<uint32_t> live;
	auto worker = [&](int seed) {
		std::vector<uint32_t> held;
		unsigned r = static_cast<unsigned>(seed);
		for (int i = 0; i < 20000; i++) {
			r = r * 1103515245u + 12345u;
			if ((r >> 16) % 2 == 0 || held.empty()) {
				uint32_t q;
				int rc = mlx5_qpn_reserved_alloc(dev, &q);
				if (rc == 0) {
					std::lock_guard<std::mutex> g(m);
					if (!live.insert(q).second)
						errors.fetch_add(1); /* two live holders */
					held.push_back(q);
					ok.fetch_add(1);
				} else if (rc != -EAGAIN && rc != -ENOSPC) {
					errors.fetch_add(1);
				}
			} else {
				uint32_t q = held.back();
				held.pop_back();
				{
					std::lock_guard<std::mutex> g(m);
					live.erase(q);
				}
				if (mlx5_qpn_reserved_dealloc(dev, q) != 0)
					errors.fetch_add(1);
			}
		}
		for (uint32_t q : held) {
			{
				std::lock_guard<std::mutex> g(m);
				live.erase(q);
			}
			if (mlx5_qpn_reserved_dealloc(dev, q) != 0)
				errors.fetch_add(1);
		}
	};
	std::thread a(worker, 1), b(worker, 2), c(worker, 3);
	a.join();
	b.join();
	c.join();
	EXPECT_EQ(errors.load(), 0u);
	EXPECT_GT(ok.load(), 10000u);
	struct mlx5_qpn_dev_stats st;
	ASSERT_EQ(mlx5_qpn_dev_stats_get(dev, &st), 0);
	EXPECT_EQ(st.pool.in_use, 0u);
	mlx5_qpn_dev_close(dev);
}

/* The parser against a few thousand mutated devargs strings: -EINVAL or 0, never a crash (the
 * libFuzzer target tests/fuzz/fuzz_devargs.cpp does the same at scale under clang). */
TEST(DevArgs, MutatedStringsAreRefusedCleanly)
{
	const std::string seeds[] = {
		"sim0,guid=0x0002c90300a1b2c3,ports=2,cache=32,reserved_qpn=yes",
		"ib=mlx5_0,quarantine_us=1000,log_range=4,max_qpns=4096",
		"sim1,cores=0-3,numa=0,fault_fw_rate=10,fault_fw_status=0xf,limit=64",
	};
	const char alphabet[] = "=,x0123456789abcdefsim_ib-:\"' \t";
	unsigned r = 12345;
	int accepted = 0, refused = 0;
	for (int i = 0; i < 6000; i++) {
		std::string s = seeds[i % 3];
		int edits = 1 + i % 4;
		for (int e = 0; e < edits; e++) {
			r = r * 1103515245u + 12345u;
			size_t pos = (r >> 8) % (s.size() + 1);
			char c = alphabet[(r >> 20) % (sizeof(alphabet) - 1)];
			switch ((r >> 4) % 3) {
			case 0:
				s.insert(pos, 1, c);
				break;
			case 1:
				if (pos < s.size())
					s.erase(pos, 1);
				break;
			default:
				if (pos < s.size())
					s[pos] = c;
				break;
			}
		}
		struct mlx5_qpn_devargs da;
		int rc = mlx5_qpn_devargs_parse(s.c_str(), &da);
		ASSERT_TRUE(rc == 0 || rc == -EINVAL) << s;
		(rc == 0 ? accepted : refused)++;
	}
	EXPECT_GT(refused, 1000);
	EXPECT_GT(accepted, 10);
}

/* Ranges go back to the device while it runs once the pool holds far more than it needs. */
TEST(DevProbe, IdleRangesGoBackToTheDevice)
{
	SimName n;
	std::string args = n.str() +
			   ",quarantine_us=0,log_max_alloc=4,max_qpns=256,cache=4,low_water=4";
	struct mlx5_qpn_dev *dev = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe(args.c_str(), &dev), 0);
	uint32_t q[96];
	ASSERT_EQ(mlx5_qpn_reserved_alloc_bulk(dev, q, 96), 0); /* 6 ranges of 16 */
	struct mlx5_qpn_dev_stats st;
	ASSERT_EQ(mlx5_qpn_dev_stats_get(dev, &st), 0);
	EXPECT_GE(st.qpns_reserved, 96u);
	ASSERT_EQ(mlx5_qpn_reserved_dealloc_bulk(dev, q, 96), 0);
	/* The control thread looks every 100 ms; give it up to 15 s on a loaded (sanitizer) run. */
	for (int i = 0; i < 1500; i++) {
		ASSERT_EQ(mlx5_qpn_dev_stats_get(dev, &st), 0);
		if (st.ranges_released >= 2)
			break;
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	}
	EXPECT_GE(st.ranges_released, 2u);
	EXPECT_LT(st.pool.capacity, 96u);
	EXPECT_EQ(st.pool.in_use, 0u);
	/* What is left still works, and growing again works too. */
	ASSERT_EQ(mlx5_qpn_reserved_alloc_bulk(dev, q, 96), 0);
	std::set<uint32_t> uniq(q, q + 96);
	EXPECT_EQ(uniq.size(), 96u);
	ASSERT_EQ(mlx5_qpn_reserved_dealloc_bulk(dev, q, 96), 0);
	mlx5_qpn_dev_close(dev);
}

/* Both backends register themselves at load; the generic layer finds them by name and by the
 * way devargs name a device. */
TEST(DevBackend, RegistryFindsBothBackends)
{
	const mlx5_qpn_backend_desc *sim = mlx5_qpn_backend_find("sim");
	const mlx5_qpn_backend_desc *hw = mlx5_qpn_backend_find("hw");
	ASSERT_NE(sim, nullptr);
	ASSERT_NE(hw, nullptr);
	EXPECT_EQ(mlx5_qpn_backend_find("nope"), nullptr);
	EXPECT_NE(sim->flags & MLX5_QPN_BACKEND_F_EMULATED, 0u);
	EXPECT_EQ(hw->flags & MLX5_QPN_BACKEND_F_EMULATED, 0u);
	EXPECT_EQ(mlx5_qpn_backend_of_name("sim3"), sim);
	EXPECT_EQ(mlx5_qpn_backend_of_name("mlx5_0"), hw);
	EXPECT_EQ(mlx5_qpn_backend_of_name("ib=mlx5_0"), hw);
	EXPECT_EQ(sim->ops->open, mlx5_qpn_sim_ops.open);
	EXPECT_EQ(hw->ops->open, mlx5_qpn_hw_ops.open);
	struct mlx5_qpn_devargs da;
	ASSERT_EQ(mlx5_qpn_devargs_parse("sim0,ports=2", &da), 0);
	EXPECT_EQ(da.backend, sim);
	EXPECT_EQ(sim_args(da).ports, 2u);
	ASSERT_EQ(mlx5_qpn_devargs_parse("cache=8,ib=mlx5_0", &da), 0);
	EXPECT_EQ(da.backend, hw);
	EXPECT_EQ(da.cache, 8u);
}

/* info.flags says "emulated" so that applications need not compare backend names. */
TEST(DevProbe, InfoFlagsSayEmulated)
{
	SimName n;
	struct mlx5_qpn_dev *dev = nullptr;
	std::string args = n.str() + ",quarantine_us=0,log_max_alloc=4,max_qpns=64";
	ASSERT_EQ(mlx5_qpn_dev_probe(args.c_str(), &dev), 0);
	struct mlx5_qpn_dev_info in;
	ASSERT_EQ(mlx5_qpn_dev_info_get(dev, &in), 0);
	EXPECT_EQ(in.flags & MLX5_QPN_DEV_F_EMULATED, MLX5_QPN_DEV_F_EMULATED);
	EXPECT_EQ(in.flags & ~MLX5_QPN_DEV_F_EMULATED, 0u);
	EXPECT_STREQ(in.backend, "sim");
	mlx5_qpn_dev_close(dev);
}

/* Purge removes what a crashed process left (here: a handle that was never closed, as a killed
 * process leaves it), through the backend's hook; a hardware name no RDMA device has is refused
 * (tests/hw/test_hw_purge.cpp purges a hardware device's lease file against the fake
 * rdma-core). */
TEST(DevPurge, RemovesLeftoversThroughTheBackend)
{
	SimName n;
	EXPECT_EQ(mlx5_qpn_dev_purge(nullptr), -EINVAL);
	EXPECT_EQ(mlx5_qpn_dev_purge(""), -EINVAL);
	EXPECT_EQ(mlx5_qpn_dev_purge(n.str().c_str()), -ENOENT);
	EXPECT_EQ(mlx5_qpn_dev_purge("mlx5_qpn_none"), -ENODEV);
	EXPECT_EQ(mlx5_qpn_dev_purge("ib=mlx5_qpn_none"), -ENODEV);
	EXPECT_EQ(mlx5_qpn_dev_purge("ib=bad,name"), -EINVAL);

	struct mlx5_qpn_dev *dev = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe(n.str().c_str(), &dev), 0);
	EXPECT_EQ(mlx5_qpn_dev_purge(n.str().c_str()), -EBUSY); /* probed here */
	mlx5_qpn_dev_close(dev);

	struct mlx5_qpn_devargs da;
	ASSERT_EQ(mlx5_qpn_devargs_parse(n.str().c_str(), &da), 0);
	struct mlx5_qpn_backend *be = nullptr;
	ASSERT_EQ(da.backend->ops->open(&da, &be), 0); /* the segment exists while be is open */
	EXPECT_EQ(mlx5_qpn_dev_purge(n.str().c_str()), -EBUSY) << "a live handle (ours) holds it";
	da.backend->ops->close(be); /* the last close removes it */
	EXPECT_EQ(mlx5_qpn_dev_purge(n.str().c_str()), -ENOENT);

	/* A process that dies with its handle open leaves the segment: that is what purge is for. */
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		struct mlx5_qpn_backend *b = nullptr;
		_exit(da.backend->ops->open(&da, &b) == 0 ? 0 : 1);
	}
	int st = 0;
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	EXPECT_EQ(mlx5_qpn_dev_purge(n.str().c_str()), 0);
	EXPECT_EQ(mlx5_qpn_dev_purge(n.str().c_str()), -ENOENT);
}

/* The device's own one-QPN allocator through the public API: rdma-core's blocks, each a device
 * command when made and when its last QPN comes back, and its refusals. One range of 16 fills
 * the pool's limit at probe, so the control thread sends no command while the test counts. */
TEST(DevFwQpn, AllocFreeAndTheirCommands)
{
	SimName n;
	struct mlx5_qpn_dev *dev = nullptr;
	std::string args = n.str() + ",quarantine_us=0,log_gran=2,log_max_alloc=4,max_qpns=16";
	ASSERT_EQ(mlx5_qpn_dev_probe(args.c_str(), &dev), 0);
	auto stats = [dev] {
		struct mlx5_qpn_dev_stats st;
		EXPECT_EQ(mlx5_qpn_dev_stats_get(dev, &st), 0);
		return st;
	};
	const uint64_t c0 = stats().dev_commands;
	EXPECT_NE(c0, 0u); /* the probe's queries and its range */
	uint32_t q[5];
	ASSERT_EQ(mlx5_qpn_dev_fw_qpn_alloc(dev, &q[0]), 0);
	EXPECT_EQ(stats().dev_commands, c0 + 1); /* CREATE_GENERAL_OBJECT: a block of 4 */
	for (int i = 1; i < 4; i++) {
		ASSERT_EQ(mlx5_qpn_dev_fw_qpn_alloc(dev, &q[i]), 0);
		EXPECT_EQ(q[i], q[0] + uint32_t(i)); /* forward-only cursor */
	}
	EXPECT_EQ(stats().dev_commands, c0 + 1); /* served from the block */
	ASSERT_EQ(mlx5_qpn_dev_fw_qpn_alloc(dev, &q[4]), 0);
	EXPECT_EQ(stats().dev_commands, c0 + 2); /* the next block */
	EXPECT_EQ(q[4] & 3u, 0u);
	/* Refusals change nothing. */
	EXPECT_EQ(mlx5_qpn_dev_fw_qpn_free(dev, q[4] + 1), -EINVAL); /* never handed out */
	EXPECT_EQ(mlx5_qpn_dev_fw_qpn_free(dev, 0xFFFFFF), -EINVAL);
	EXPECT_EQ(mlx5_qpn_reserved_dealloc(dev, q[0]), -EINVAL); /* not the pool's */
	EXPECT_EQ(mlx5_qpn_dev_fw_qpn_free(dev, q[0]), 0);
	EXPECT_EQ(mlx5_qpn_dev_fw_qpn_free(dev, q[0]), -EINVAL); /* double free */
	EXPECT_EQ(stats().dev_commands, c0 + 2);
	for (int i = 1; i < 4; i++)
		EXPECT_EQ(mlx5_qpn_dev_fw_qpn_free(dev, q[i]), 0);
	EXPECT_EQ(stats().dev_commands, c0 + 3); /* the block came back whole: destroyed */
	auto st = stats();
	EXPECT_EQ(st.fw_qpn_allocs, 5u);
	EXPECT_EQ(st.fw_qpn_frees, 4u);
	EXPECT_EQ(st.ranges_reserved, 1u); /* the pool's own, untouched */
	EXPECT_EQ(mlx5_qpn_dev_fw_qpn_alloc(nullptr, &q[0]), -EINVAL);
	EXPECT_EQ(mlx5_qpn_dev_fw_qpn_alloc(dev, nullptr), -EINVAL);
	EXPECT_EQ(mlx5_qpn_dev_fw_qpn_free(nullptr, q[4]), -EINVAL);
	mlx5_qpn_dev_close(dev); /* q[4]'s block goes back with the handle */
}

/* Where the device has no RESERVED_QPN object (the pool then runs on ordinary QPs), the
 * one-QPN allocator is refused as mlx5dv_reserved_qpn_alloc() refuses it. */
TEST(DevFwQpn, UnsupportedIsEopnotsupp)
{
	for (const char *extra :
	     {",cap_reserved_qpn=0,reserved_qpn=try", ",fault_nodevx=1,reserved_qpn=try"}) {
		SimName n;
		struct mlx5_qpn_dev *dev = nullptr;
		std::string args = n.str() + ",quarantine_us=0,log_max_alloc=4,max_qpns=64" + extra;
		ASSERT_EQ(mlx5_qpn_dev_probe(args.c_str(), &dev), 0) << args;
		uint32_t q;
		EXPECT_EQ(mlx5_qpn_dev_fw_qpn_alloc(dev, &q), -EOPNOTSUPP) << args;
		EXPECT_EQ(mlx5_qpn_dev_fw_qpn_free(dev, 4096), -EINVAL) << args; /* none out */
		mlx5_qpn_dev_close(dev);
	}
}
