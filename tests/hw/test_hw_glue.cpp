/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rdma-core glue and the hardware backend's probe. These machines have no RDMA device
 * (and may lack the rdma-core runtime libraries): every test passes either way and checks
 * the path that applies.
 */
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>
#include <rte_log.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "hw/mlx5_qpn_glue.h"
#include "hw/mlx5_qpn_hw.h"
#include "hw_test_util.h"

using hwtest::count_lines;
using hwtest::LogCapture;

namespace {

mlx5_qpn_devargs
hw_devargs(const char *name)
{
	mlx5_qpn_devargs da{};
	snprintf(da.name, sizeof(da.name), "%s", name);
	return da;
}

/* Number of RDMA devices, and whether one is called name; -1 without rdma-core. */
int
device_count(const char *name, bool *present)
{
	*present = false;
	const mlx5_qpn_glue *g = mlx5_qpn_glue_get_quiet();
	if (g == nullptr)
		return -1;
	int n = 0;
	ibv_device **list = g->get_device_list(&n);
	if (list == nullptr)
		return 0;
	for (int i = 0; i < n; i++)
		if (strcmp(g->get_device_name(list[i]), name) == 0)
			*present = true;
	g->free_device_list(list);
	return n;
}

/* Every verbs + mlx5 member resolved (librdmacm is qpn-testpmd's: tests/app). */
bool
core_complete(const mlx5_qpn_glue *g)
{
	return g->get_device_list && g->free_device_list && g->get_device_name &&
	       g->get_device_guid && g->open_device && g->close_device && g->query_device &&
	       g->query_port && g->dv_is_supported && g->dv_open_device && g->devx_general_cmd &&
	       g->devx_obj_create && g->devx_obj_destroy && g->reserved_qpn_alloc &&
	       g->reserved_qpn_dealloc && g->fork_init && g->is_fork_initialized &&
	       g->devx_alloc_uar && g->devx_free_uar && g->alloc_pd && g->dealloc_pd &&
	       g->create_cq && g->destroy_cq && g->create_qp && g->destroy_qp;
}

bool
all_null(const mlx5_qpn_glue *g)
{
	mlx5_qpn_glue zero;
	memset(&zero, 0, sizeof(zero));
	return memcmp(g, &zero, sizeof(zero)) == 0;
}

} // namespace

TEST(HwGlue, LoadedTwiceReturnsSameTable)
{
	const mlx5_qpn_glue *a = mlx5_qpn_glue_get();
	const mlx5_qpn_glue *b = mlx5_qpn_glue_get();
	EXPECT_EQ(a, b);
	EXPECT_EQ(a, mlx5_qpn_glue_get_quiet());
	if (a != nullptr) {
		EXPECT_TRUE(core_complete(a));
		EXPECT_STREQ(mlx5_qpn_glue_error(), "");
	} else {
		/* Names the library or the symbol. */
		EXPECT_NE(std::string(mlx5_qpn_glue_error()).find(".so.1"), std::string::npos)
			<< mlx5_qpn_glue_error();
	}
}

TEST(HwGlue, PrivateLoadMatchesGlobalTable)
{
	mlx5_qpn_glue mine;
	char err[256];
	int rc = mlx5_qpn_glue_load(nullptr, &mine, err, sizeof(err));
	const mlx5_qpn_glue *global = mlx5_qpn_glue_get_quiet();
	if (getenv("MLX5_QPN_GLUE_LIBDIR") != nullptr)
		GTEST_SKIP() << "global table loaded from MLX5_QPN_GLUE_LIBDIR";
	ASSERT_EQ(rc == 0, global != nullptr) << err;
	if (rc != 0) {
		EXPECT_TRUE(all_null(&mine));
		return;
	}
	/* Same libraries, so the very same entry points. */
	EXPECT_EQ(mine.get_device_list, global->get_device_list);
	EXPECT_EQ(mine.devx_obj_create, global->devx_obj_create);
	EXPECT_EQ(mine.reserved_qpn_alloc, global->reserved_qpn_alloc);
	mlx5_qpn_glue_unload(&mine);
	EXPECT_TRUE(all_null(&mine));
}

TEST(HwGlue, MissingLibraryIsNamed)
{
	mlx5_qpn_glue g;
	char err[256];
	EXPECT_EQ(mlx5_qpn_glue_load("/nonexistent/mlx5_qpn", &g, err, sizeof(err)), -ENOENT);
	EXPECT_NE(std::string(err).find("cannot load libibverbs.so.1"), std::string::npos) << err;
	EXPECT_TRUE(all_null(&g));
	EXPECT_EQ(mlx5_qpn_glue_load(nullptr, nullptr, err, sizeof(err)), -EINVAL);
}

TEST(HwGlue, MissingSymbolIsNamed)
{
	/* A directory where libmlx5.so.1 is really libibverbs: every mlx5dv_* symbol is missing. */
	void *h = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (h == nullptr)
		GTEST_SKIP() << "libibverbs.so.1 not installed";
	struct link_map *lm = nullptr;
	ASSERT_EQ(dlinfo(h, RTLD_DI_LINKMAP, &lm), 0);
	std::string real = lm->l_name;
	char dir[] = "/tmp/mlx5_qpn_glue_XXXXXX";
	ASSERT_NE(mkdtemp(dir), nullptr);
	std::string verbs = std::string(dir) + "/libibverbs.so.1";
	std::string mlx5 = std::string(dir) + "/libmlx5.so.1";
	ASSERT_EQ(symlink(real.c_str(), verbs.c_str()), 0);
	ASSERT_EQ(symlink(real.c_str(), mlx5.c_str()), 0);

	mlx5_qpn_glue g;
	char err[256];
	int rc = mlx5_qpn_glue_load(dir, &g, err, sizeof(err));
	unlink(verbs.c_str());
	unlink(mlx5.c_str());
	rmdir(dir);
	dlclose(h);
	EXPECT_EQ(rc, -ENOSYS);
	EXPECT_NE(std::string(err).find("symbol mlx5dv_is_supported missing from libmlx5.so.1"),
		  std::string::npos)
		<< err;
	EXPECT_TRUE(all_null(&g));
}

namespace {

/* The real libibverbs' path, or "" when it is not installed. */
std::string
real_libibverbs()
{
	void *h = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (h == nullptr)
		return "";
	struct link_map *lm = nullptr;
	std::string path = dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 ? lm->l_name : "";
	dlclose(h);
	return path;
}

/*
 * A directory holding the real libibverbs and a stub libmlx5.so.1 built here that exports
 * every name in syms (empty functions: the glue only resolves them). Each build gets its own
 * directory, so no earlier stub is found loaded already.
 */
class StubLibs {
public:
	explicit StubLibs(const std::string &verbs)
	{
		char tmpl[] = "/tmp/mlx5_qpn_stub_XXXXXX";
		if (mkdtemp(tmpl) != nullptr)
			dir_ = tmpl;
		verbs_ = verbs;
	}
	~StubLibs()
	{
		if (!dir_.empty())
			(void)!system(("rm -rf '" + dir_ + "'").c_str());
	}
	StubLibs(const StubLibs &) = delete;
	StubLibs &operator=(const StubLibs &) = delete;

	/* Build the stub into a fresh subdirectory and load the glue from it. */
	int load(const std::set<std::string> &syms, mlx5_qpn_glue *g, std::string *err)
	{
		const std::string sub = dir_ + "/" + std::to_string(builds_++);
		const std::string src = sub + "/stub.c";
		if (mkdir(sub.c_str(), 0700) != 0 ||
		    symlink(verbs_.c_str(), (sub + "/libibverbs.so.1").c_str()) != 0)
			return -EIO;
		FILE *f = fopen(src.c_str(), "w");
		if (f == nullptr)
			return -EIO;
		for (const std::string &s : syms)
			fprintf(f, "void %s(void) {}\n", s.c_str());
		fclose(f);
		const std::string cc = "cc -shared -fPIC -o '" + sub + "/libmlx5.so.1' '" + src +
				       "' 2>/dev/null";
		if (system(cc.c_str()) != 0)
			return -ENOEXEC;
		char buf[256];
		int rc = mlx5_qpn_glue_load(sub.c_str(), g, buf, sizeof(buf));
		*err = buf;
		return rc;
	}

private:
	std::string dir_, verbs_;
	int builds_ = 0;
};

/* The name of the libmlx5 symbol the load reports missing, or "". */
std::string
missing_mlx5_symbol(const std::string &err)
{
	const std::string head = "symbol ", tail = " missing from libmlx5.so.1";
	if (err.rfind(head, 0) != 0 || err.find(tail) == std::string::npos)
		return "";
	return err.substr(head.size(), err.find(tail) - head.size());
}

} // namespace

/*
 * An rdma-core before 34: a libmlx5 without mlx5dv_reserved_qpn_alloc/_dealloc still loads,
 * with both members NULL; half of the pair is none of it. The stub starts from the symbols the
 * glue resolves and learns any other it needs from the load's own error text.
 */
TEST(HwGlue, Libmlx5WithoutSingleQpnApiLoads)
{
	const std::string verbs = real_libibverbs();
	if (verbs.empty())
		GTEST_SKIP() << "libibverbs.so.1 not installed";
	if (system("cc --version >/dev/null 2>&1") != 0)
		GTEST_SKIP() << "no C compiler to build the stub libmlx5";
	StubLibs libs(verbs);
	std::set<std::string> syms = {"mlx5dv_is_supported",     "mlx5dv_open_device",
				      "mlx5dv_create_qp",        "mlx5dv_init_obj",
				      "mlx5dv_devx_general_cmd", "mlx5dv_devx_obj_create",
				      "mlx5dv_devx_obj_destroy", "mlx5dv_devx_alloc_uar",
				      "mlx5dv_devx_free_uar"};
	mlx5_qpn_glue g;
	std::string err;
	int rc = -ENOSYS;
	for (int i = 0; i < 32 && rc == -ENOSYS; i++) {
		rc = libs.load(syms, &g, &err);
		const std::string more = missing_mlx5_symbol(err);
		if (rc != -ENOSYS || more.empty() || more.find("reserved_qpn") != std::string::npos)
			break;
		syms.insert(more);
	}
	ASSERT_EQ(rc, 0) << err;
	EXPECT_EQ(err, "");
	EXPECT_EQ(g.reserved_qpn_alloc, nullptr);
	EXPECT_EQ(g.reserved_qpn_dealloc, nullptr);
	EXPECT_NE(g.devx_obj_create, nullptr);
	EXPECT_NE(g.get_device_list, nullptr);
	mlx5_qpn_glue_unload(&g);

	/* Only the alloc half: both stay NULL. */
	std::set<std::string> half = syms;
	half.insert("mlx5dv_reserved_qpn_alloc");
	ASSERT_EQ(libs.load(half, &g, &err), 0) << err;
	EXPECT_EQ(g.reserved_qpn_alloc, nullptr);
	EXPECT_EQ(g.reserved_qpn_dealloc, nullptr);
	mlx5_qpn_glue_unload(&g);

	/* Both: resolved (the stub is what the glue loads). */
	half.insert("mlx5dv_reserved_qpn_dealloc");
	ASSERT_EQ(libs.load(half, &g, &err), 0) << err;
	EXPECT_NE(g.reserved_qpn_alloc, nullptr);
	EXPECT_NE(g.reserved_qpn_dealloc, nullptr);
	mlx5_qpn_glue_unload(&g);

	/* A required symbol stays required. */
	std::set<std::string> short_one = syms;
	short_one.erase("mlx5dv_devx_obj_create");
	EXPECT_EQ(libs.load(short_one, &g, &err), -ENOSYS);
	EXPECT_EQ(missing_mlx5_symbol(err), "mlx5dv_devx_obj_create") << err;
}

TEST(HwOps, TableShape)
{
	EXPECT_NE(mlx5_qpn_hw_ops.open, nullptr);
	EXPECT_NE(mlx5_qpn_hw_ops.query_caps, nullptr);
	EXPECT_NE(mlx5_qpn_hw_ops.range_reserve, nullptr);
	EXPECT_NE(mlx5_qpn_hw_ops.range_release, nullptr);
	EXPECT_NE(mlx5_qpn_hw_ops.qpn_reserve_one, nullptr);
	EXPECT_NE(mlx5_qpn_hw_ops.qpn_release_one, nullptr);
	EXPECT_NE(mlx5_qpn_hw_ops.uar_map, nullptr);
	EXPECT_NE(mlx5_qpn_hw_ops.uar_unmap, nullptr);
	EXPECT_NE(mlx5_qpn_hw_ops.close, nullptr);
	/* The ordinary-QP source: one UD QP per QPN where objects cannot be made. */
	EXPECT_NE(mlx5_qpn_hw_ops.qp_create, nullptr);
	EXPECT_NE(mlx5_qpn_hw_ops.qp_destroy, nullptr);
}

TEST(HwOps, OpenMlx5_0IsEnodevHere)
{
	bool present = false;
	device_count("mlx5_0", &present);
	if (present)
		GTEST_SKIP() << "this machine has mlx5_0";
	mlx5_qpn_devargs da = hw_devargs("mlx5_0");
	mlx5_qpn_backend *be = reinterpret_cast<mlx5_qpn_backend *>(0x1);
	LogCapture cap;
	EXPECT_EQ(mlx5_qpn_hw_ops.open(&da, &be), -ENODEV);
	EXPECT_EQ(be, nullptr);
	std::string log = cap.text();
	EXPECT_EQ(count_lines(log), 1u) << log;
	EXPECT_EQ(log.rfind("mlx5_qpn.hw: no RDMA device \"mlx5_0\"", 0), 0u) << log;
}

TEST(HwOps, OpenUnknownDeviceLogsExactLine)
{
	const char *name = "mlx5_qpn_nodev";
	bool present = false;
	int n = device_count(name, &present);
	if (n < 0)
		GTEST_SKIP() << "rdma-core not installed: " << mlx5_qpn_glue_error();
	mlx5_qpn_devargs da = hw_devargs(name);
	mlx5_qpn_backend *be = nullptr;
	LogCapture cap;
	EXPECT_EQ(mlx5_qpn_hw_ops.open(&da, &be), -ENODEV);
	EXPECT_EQ(be, nullptr);
	EXPECT_EQ(cap.text(), "mlx5_qpn.hw: no RDMA device \"mlx5_qpn_nodev\" (" +
				      std::to_string(n) + " devices found)\n");
}

TEST(HwOps, OpenWithoutRdmaCoreNamesWhatIsMissing)
{
	if (mlx5_qpn_glue_get_quiet() != nullptr)
		GTEST_SKIP() << "rdma-core is installed";
	mlx5_qpn_devargs da = hw_devargs("mlx5_0");
	mlx5_qpn_backend *be = nullptr;
	LogCapture cap;
	EXPECT_EQ(mlx5_qpn_hw_ops.open(&da, &be), -ENODEV);
	std::string log = cap.text();
	EXPECT_EQ(count_lines(log), 1u) << log;
	EXPECT_NE(log.find(mlx5_qpn_glue_error()), std::string::npos) << log;
}

TEST(HwOps, BadArgumentsAreRefused)
{
	mlx5_qpn_backend *be = nullptr;
	mlx5_qpn_devargs empty = hw_devargs("");
	LogCapture cap;
	EXPECT_EQ(mlx5_qpn_hw_ops.open(nullptr, &be), -EINVAL);
	EXPECT_EQ(mlx5_qpn_hw_ops.open(&empty, &be), -EINVAL);
	mlx5_qpn_devargs da = hw_devargs("mlx5_0");
	EXPECT_EQ(mlx5_qpn_hw_ops.open(&da, nullptr), -EINVAL);
	/* An unterminated name must not be read past its array. */
	mlx5_qpn_devargs unterminated = hw_devargs("");
	memset(unterminated.name, 'x', sizeof(unterminated.name));
	EXPECT_EQ(mlx5_qpn_hw_ops.open(&unterminated, &be), -EINVAL);
	EXPECT_EQ(count_lines(cap.text()), 4u) << "one readable line per refused call";

	mlx5_qpn_caps caps;
	mlx5_qpn_range_obj obj{};
	mlx5_qpn_uar uar{};
	uint32_t qpn = 0;
	EXPECT_EQ(mlx5_qpn_hw_ops.query_caps(nullptr, &caps), -EINVAL);
	EXPECT_EQ(mlx5_qpn_hw_ops.range_reserve(nullptr, 4, &obj), -EINVAL);
	EXPECT_EQ(mlx5_qpn_hw_ops.range_release(nullptr, &obj), -EINVAL);
	EXPECT_EQ(mlx5_qpn_hw_ops.qpn_reserve_one(nullptr, &qpn), -EINVAL);
	EXPECT_EQ(mlx5_qpn_hw_ops.qpn_release_one(nullptr, 5), -EINVAL);
	EXPECT_EQ(mlx5_qpn_hw_ops.uar_map(nullptr, &uar), -EINVAL);
	EXPECT_EQ(mlx5_qpn_hw_ops.uar_unmap(nullptr, &uar), -EINVAL);
	mlx5_qpn_hw_ops.close(nullptr); /* no crash */
}
