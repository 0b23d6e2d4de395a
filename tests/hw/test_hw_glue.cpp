/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rdma-core glue and the hardware backend's probe. These machines have no RDMA device
 * (and may lack the rdma-core runtime libraries): every test passes either way and checks
 * the path that applies.
 */
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <link.h>
#include <rte_log.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
	return g->get_device_list && g->free_device_list && g->get_device_name && g->open_device &&
	       g->close_device && g->query_device && g->query_port && g->dv_is_supported &&
	       g->dv_open_device && g->devx_general_cmd && g->devx_obj_create &&
	       g->devx_obj_destroy && g->reserved_qpn_alloc && g->reserved_qpn_dealloc &&
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
	/* The ordinary-QP source (issue 9): one UD QP per QPN where objects cannot be made. */
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
